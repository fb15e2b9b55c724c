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


def _quantized(a16_budget: float, **config):
    model = tiny_llama(tie=True, seed=3)
    q = make_quantizer({"name": "edgeflow", "budget_bits": 6, "alpha_grid": [0.5], "a16_budget": a16_budget,
                        **config})
    q.calibrate(model, [torch.randint(0, 256, (48,), generator=torch.Generator().manual_seed(i)) for i in range(3)])
    return model, q.quantize(model, "tiny")


def _engine_and_reference(model, artifact, numerics="npu"):
    from harness.engine.capi import NativeEngine

    ids = torch.randint(0, 256, (40,), generator=torch.Generator().manual_seed(9))
    with NativeEngine.from_artifact(artifact, threads=2, chunk=16, numerics=numerics) as engine:
        got = engine.logits(ids)
    with torch.no_grad():
        want = build_fakequant_model(artifact, model, numerics=numerics)(ids[None]).logits[0]
    return got, want


@pytest.mark.parametrize("a16_budget", [0.0, 0.5, 1.0])  # A8 everywhere, mixed A8/A16, A16 everywhere
def test_runtime_requantizes_outputs_as_the_npu_numerics_define(a16_budget):
    """The accelerator lane computes the artifact's NPU numerics: inputs at each linear's width, outputs requantized
    to its grid (harness/quant/numerics.py); A16 linears included, which the lane could not run before."""
    model, artifact = _quantized(a16_budget)
    wide = sum(q.act_bits == 16 for q in artifact.linears.values())
    assert (wide > 0) == (a16_budget > 0) and artifact.manifest["runtime_compatible"]
    got, want = _engine_and_reference(model, artifact)
    assert float((got - want).abs().max() / want.abs().max()) < 1e-4
    assert torch.equal(got.argmax(-1), want.argmax(-1))


def test_float_outputs_are_a_separate_lane_and_differ():
    """numerics=cpu-float (edgeflow-run --float-outputs) is the CPU-only lane: it equals the fake-quant model with
    float outputs, and it is not what the NPU numerics compute (coarse 8-bit output grids make it visible)."""
    model, artifact = _quantized(0.0, output_grid="tensor", output_headroom=8.0)
    got_float, want_float = _engine_and_reference(model, artifact, "cpu-float")
    assert float((got_float - want_float).abs().max() / want_float.abs().max()) < 1e-4
    got_npu, _ = _engine_and_reference(model, artifact, "npu")
    assert float((got_npu - got_float).abs().max() / got_float.abs().max()) > 1e-3


def test_packed_a16_file_runs_in_edgeflow_run_as_in_memory(tmp_path):
    """A version-3 file with A16 linears and output grids: the CLI loads it, says which numerics it ran, and its
    first token and logits are the in-memory engine's; --float-outputs is refused for A16 linears with the reason."""
    from harness.engine.build import engine_binary
    from harness.engine.capi import NativeEngine
    from harness.engine.run import RuntimeRunError, run_edgeflow
    from harness.pack import PackedFile, pack_artifact

    _, artifact = _quantized(0.5)
    path = pack_artifact(artifact, tmp_path / "a16.efpk")
    assert PackedFile(path).version >= 3 and not PackedFile(path).float_outputs
    prompt = [3, 17, 99, 4, 250, 8]
    with NativeEngine.from_artifact(artifact) as mem, NativeEngine.open(path, chunk=4) as disk:
        want = mem.logits(prompt)
        assert torch.equal(disk.logits(prompt), want)
    binary = str(engine_binary("host"))
    rep = run_edgeflow(path, prompt, threads=2, chunk=4, binary=binary)
    assert rep.raw["numerics"] == "requantized" and rep.raw["a16_linears"] == sum(
        q.act_bits == 16 for q in artifact.linears.values())
    assert rep.tokens[0] == int(want[-1].argmax())
    with pytest.raises(RuntimeRunError, match="16-bit activations need the output grid"):
        run_edgeflow(path, prompt, threads=2, binary=binary, extra_args=["--float-outputs"])
