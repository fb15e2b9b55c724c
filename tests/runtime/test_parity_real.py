"""Parity on the real default model (SmolLM2-135M): the EdgeFlow quantizer's 5-bit artifact scored by the native
runtime and by the fake-quant reference (harness.quant.fakequant)."""
from __future__ import annotations

import pytest
import torch

from harness.models.zoo import load_model
from harness.quant import make_quantizer
from harness.quant.fakequant import build_fakequant_model
from harness.runtime import NativeEngine

pytestmark = [pytest.mark.real_model, pytest.mark.native]

CALIBRATION = ("It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of "
               "foolishness, it was the epoch of belief, it was the epoch of incredulity. ") * 4
TEXTS = ["The capital of France is Paris, and the capital of Germany is",
         "def fibonacci(n):\n    if n < 2:\n        return n\n    return",
         "Once upon a time, in a small village by the sea, there lived an old fisherman who"]

# Per position, relative logit error max|got - want| / max|want|. Positions agree to ~1e-6 until the first flip:
# the two sides sum attention and norms in a different float order (~1e-7 apart), so an activation within an ulp of
# a rounding tie (x * m = k + 0.5) lands on the other side, that code differs by one, and later layers and positions
# (through the KV cache) carry it. With ~2e5 rounding decisions per position a few such flips are expected. (Seen
# while writing this test: nudging one o_proj input of layer 20 by one ulp in the reference reproduced the runtime's
# logits to 1e-6.) Measured: max 0.12, about a third of the positions within 1e-4. A flip can also change the top-1
# token where the reference's two best logits are close (seen on an AVX-512 host, whose float sums are ordered
# differently: 1 of 50 positions in one CI run). So: the same top-1 at nearly every position, the runtime's choice always among the
# reference's best few, every error bounded. A real defect (a wrong scale, layout or operator) moves every position
# by far more than MAX_REL_ERR and the top-1 with it.
TIGHT, MAX_REL_ERR = 1e-4, 0.3
MIN_TOP1_AGREEMENT, TOP_K = 0.9, 5


def test_runtime_matches_fakequant_on_smollm2(default_model_spec):
    model, tok = load_model(default_model_spec)
    calib = torch.tensor(tok(CALIBRATION)["input_ids"])
    quantizer = make_quantizer({"name": "edgeflow", "budget_bits": 5, "alpha_grid": [0.5]})
    quantizer.calibrate(model, [calib[i * 32:(i + 1) * 32] for i in range(4)])
    artifact = quantizer.quantize(model, "smollm2-135m")
    reference = build_fakequant_model(artifact, model)
    errs, agree = [], []
    with NativeEngine.from_artifact(artifact, threads=2, chunk=16) as engine:
        for text in TEXTS:
            ids = torch.tensor(tok(text)["input_ids"])
            with torch.no_grad():
                want = reference(ids[None]).logits[0].float()
            got = engine.logits(ids)
            err = (got - want).abs().amax(-1) / want.abs().amax(-1)
            print(f"{len(ids)} tokens: relative logit error per position {[f'{e:.0e}' for e in err.tolist()]}")
            in_top_k = (want.topk(TOP_K, -1).indices == got.argmax(-1, keepdim=True)).any(-1)
            assert bool(in_top_k.all()), f"the runtime's top-1 is outside the reference's top-{TOP_K} in {text!r}"
            errs.append(err)
            agree.append(got.argmax(-1) == want.argmax(-1))
    errs, agree = torch.cat(errs), torch.cat(agree)
    print(f"top-1 agreement {float(agree.float().mean()):.0%} of {len(agree)} positions")
    assert float(agree.float().mean()) >= MIN_TOP1_AGREEMENT
    tight = float((errs < TIGHT).float().mean())
    print(f"max relative logit error {float(errs.max()):.2e}; positions within {TIGHT:g}: {tight:.0%} of {len(errs)}")
    assert float(errs.max()) < MAX_REL_ERR
