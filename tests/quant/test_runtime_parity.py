"""The native runtime computes what the fake-quant reference computes on artifacts from the real quantizers (signed
per-channel scales, per-tensor grids, smoothing), not only on hand-made ones (tests/runtime)."""
import pytest
import torch

from harness.quant import make_quantizer
from harness.quant.fakequant import build_fakequant_model
from tests.tiny_llama import tiny_llama

pytestmark = pytest.mark.native


@pytest.mark.parametrize("name,bits", [("edgeflow", 4.5), ("smoothquant", 6)])
def test_runtime_matches_fakequant_on_quantizer_artifacts(name, bits):
    from harness.engine.capi import NativeEngine

    model = tiny_llama(tie=True, seed=3)
    q = make_quantizer({"name": name, "budget_bits": bits, "alpha_grid": [0.0, 0.5]})
    q.calibrate(model, [torch.randint(0, 256, (48,), generator=torch.Generator().manual_seed(i)) for i in range(3)])
    artifact = q.quantize(model, "tiny")
    assert any(bool((layer.w_scale < 0).any()) for layer in artifact.linears.values())
    ids = torch.randint(0, 256, (40,), generator=torch.Generator().manual_seed(9))
    with NativeEngine.from_artifact(artifact, threads=1) as engine:
        got = engine.logits(ids)
    with torch.no_grad():
        want = build_fakequant_model(artifact, model)(ids[None]).logits[0]
    assert float((got - want).abs().max() / want.abs().max()) < 1e-4  # measured ~3e-7
    assert torch.equal(got.argmax(-1), want.argmax(-1))
