"""Parity on the real default model (SmolLM2-135M): the EdgeFlow quantizer's 5-bit artifact scored by the native
runtime and by the fake-quant reference (harness.quant.fakequant)."""
from __future__ import annotations

import copy

import pytest
import torch

from harness.models.zoo import load_model
from harness.quant import make_quantizer
from harness.quant.fakequant import build_fakequant_model
from harness.engine.capi import NativeEngine

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
# logits to 1e-6.) Measured: max 0.12, about a third of the positions within 1e-4. After a flip the logits move by
# up to ~2 (absolute), more than the reference's top-1 margin at some positions (as small as 0.006 on these texts), so
# which positions keep their top-1 there depends on the float order of the build (AVX-512, AVX2 and SSE2 kernels each
# lose it at 1-3 different positions of 50). So: the same top-1 token at every position before a flip (error within
# TIGHT), at least MIN_TOP1 of all positions, the runtime's choice always among the reference's TOP_K best, every
# error bounded. A real defect (a wrong scale, layout or operator) moves every position by far more than MAX_REL_ERR.
# The reference's own float order is one of several legitimate ones, and it flips too: on an AVX-512 EPYC, torch's
# float32 reference put position 1 of the third text on the other side of a tie, where the same reference in float64
# agreed with the runtime to 1e-6 for six more positions. So each position is compared with the nearer of the two
# references (float32, float64): both compute the artifact's numerics, and a defect is far from both.
TIGHT, MAX_REL_ERR, MIN_TOP1, TOP_K = 1e-4, 0.3, 0.9, 5


def nearer(got: torch.Tensor, references: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Per position, (relative logit error, reference logits) of the reference nearer to `got` [T, vocab]."""
    errs = torch.stack([(got - want).abs().amax(-1) / want.abs().amax(-1) for want in references])  # [R, T]
    best = errs.argmin(0)
    return errs.gather(0, best[None])[0], torch.stack(references)[best, torch.arange(len(best))]


def test_runtime_matches_fakequant_on_smollm2(default_model_spec):
    model, tok = load_model(default_model_spec)
    calib = torch.tensor(tok(CALIBRATION)["input_ids"])
    quantizer = make_quantizer({"name": "edgeflow", "budget_bits": 5, "alpha_grid": [0.5]})
    quantizer.calibrate(model, [calib[i * 32:(i + 1) * 32] for i in range(4)])
    artifact = quantizer.quantize(model, "smollm2-135m")
    references = [build_fakequant_model(artifact, model)]
    references.append(copy.deepcopy(references[0]).double())
    errs, agree = [], []
    with NativeEngine.from_artifact(artifact, threads=2, chunk=16) as engine:
        for text in TEXTS:
            ids = torch.tensor(tok(text)["input_ids"])
            with torch.no_grad():
                wants = [reference(ids[None]).logits[0].float() for reference in references]
            got = engine.logits(ids)
            err, want = nearer(got, wants)
            print(f"{len(ids)} tokens: relative logit error per position {[f'{e:.0e}' for e in err.tolist()]}")
            same = got.argmax(-1) == want.argmax(-1)
            assert bool(same[err < TIGHT].all()), f"top-1 differs before any rounding flip in {text!r}"
            in_top_k = (want.topk(TOP_K, -1).indices == got.argmax(-1, keepdim=True)).any(-1)
            assert bool(in_top_k.all()), f"the runtime's top-1 is outside the reference's top-{TOP_K} in {text!r}"
            errs.append(err)
            agree.append(same)
    errs = torch.cat(errs)
    tight = float((errs < TIGHT).float().mean())
    print(f"max relative logit error {float(errs.max()):.2e}; positions within {TIGHT:g}: {tight:.0%} of {len(errs)}")
    top1 = float(torch.cat(agree).float().mean())
    print(f"top-1 agreement {top1:.0%}")
    assert float(errs.max()) < MAX_REL_ERR
    assert top1 >= MIN_TOP1
