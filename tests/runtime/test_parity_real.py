"""Parity on the real default model (SmolLM2-135M): an artifact of its real weights (per-channel codes of 6..8 bits,
smoothing-like in_scale, calibrated act_scale) scored by the native runtime and by the fake-quant reference."""
from __future__ import annotations

import pytest
import torch

from harness.models.zoo import load_model
from harness.quant.fakequant import build_fakequant_model
from harness.runtime import NativeEngine
from tests.runtime.conftest import make_artifact

pytestmark = [pytest.mark.real_model, pytest.mark.native]

# Per position, relative logit error max|got - want| / max|want|. Most positions agree to ~1e-6. A few do not: the two
# sides sum attention and norms in a different float order, and an activation within one ulp of a rounding tie
# (x * m = k + 0.5) then lands on the other side; that code differs by one and later layers amplify it (found:
# layer 20's o_proj input 16.5 +- 1.9e-6 at one position of the second prompt, 20% logit error 10 layers later).
# (Nudging that input by one ulp in the reference reproduces the runtime's logits to 1e-6.) A per-tensor static
# activation scale over SmolLM2's massive activations makes such an artifact this sensitive. So: positions before
# the first flip agree tightly, the top-1 token agrees on nearly all positions, and every error stays bounded.
TIGHT = 1e-4
TIGHT_FRACTION = 0.6
TOP1_FRACTION = 0.75
MAX_REL_ERR = 1.0
TEXTS = ["The capital of France is Paris, and the capital of Germany is",
         "def fibonacci(n):\n    if n < 2:\n        return n\n    return",
         "Once upon a time, in a small village by the sea, there lived an old fisherman who"]


def test_runtime_matches_fakequant_on_smollm2(default_model_spec):
    model, tok = load_model(default_model_spec)
    artifact = make_artifact(model, seed=0, min_bits=6)
    reference = build_fakequant_model(artifact, model)
    errs, same = [], []
    with NativeEngine.from_artifact(artifact, threads=2, chunk=16) as engine:
        for text in TEXTS:
            ids = torch.tensor(tok(text)["input_ids"])
            with torch.no_grad():
                want = reference(ids[None]).logits[0].float()
            got = engine.logits(ids)
            err = (got - want).abs().amax(-1) / want.abs().amax(-1)
            print(f"{len(ids)} tokens: relative logit error per position {[f'{e:.1e}' for e in err.tolist()]}")
            errs.append(err)
            same.append(got.argmax(-1) == want.argmax(-1))
    errs, same = torch.cat(errs), torch.cat(same)
    tight, top1 = float((errs < TIGHT).float().mean()), float(same.float().mean())
    print(f"max relative logit error {float(errs.max()):.2e}; positions within {TIGHT:g}: {tight:.0%}; "
          f"same top-1: {top1:.0%} of {len(same)}")
    assert float(errs.max()) < MAX_REL_ERR and tight >= TIGHT_FRACTION and top1 >= TOP1_FRACTION
