"""Parity: on the same quantized artifact, the native runtime's logits match the fake-quant reference
(harness.quant.fakequant): the same top-1 token at every position and a bounded relative logit error."""
from __future__ import annotations

import pytest
import torch

from harness.quant.fakequant import build_fakequant_model
from harness.engine.capi import NativeEngine
from tests.runtime.conftest import make_artifact, tiny_llama

pytestmark = pytest.mark.native

# Float summation order (attention, norms, LM head) and the rare activation that rounds the other way differ
# between the two; measured max relative error on these fixtures is ~4e-7 (see the printout with -s).
MAX_REL_ERR = 1e-4


def _prompts(vocab: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return [torch.randint(0, vocab, (n,), generator=g) for n in (1, 7, 40, 100)]


def _max_rel_err(got: torch.Tensor, want: torch.Tensor) -> float:
    return float((got - want).abs().max() / want.abs().max())


@pytest.mark.parametrize("tie,head_in_budget", [(True, False), (False, False), (False, True), (True, True)])
@pytest.mark.parametrize("chunk", [128, 16])
def test_runtime_matches_fakequant(tie, head_in_budget, chunk):
    """head_in_budget: an LM head of 3..8-bit rows, packed as a quantized weight (and a tied model's head copied)."""
    model = tiny_llama(seed=3, tie=tie)
    artifact = make_artifact(model, seed=4, head_in_budget=head_in_budget)
    reference = build_fakequant_model(artifact, model)
    with NativeEngine.from_artifact(artifact, threads=2, chunk=chunk) as engine:
        for ids in _prompts(model.config.vocab_size):
            with torch.no_grad():
                want = reference(ids[None]).logits[0].float()
            got = engine.logits(ids)
            assert got.shape == want.shape
            err = _max_rel_err(got, want)
            print(f"tie={tie} chunk={chunk} T={len(ids)}: max relative logit error {err:.2e}")
            assert err < MAX_REL_ERR
            assert torch.equal(got.argmax(-1), want.argmax(-1)), f"top-1 differs at T={len(ids)}"


def test_logprobs_normalised(tiny_pair):
    _, artifact = tiny_pair
    with NativeEngine.from_artifact(artifact) as engine:
        lp = engine.logprobs([5, 9, 200])
    assert lp.shape == (3, 256)
    assert torch.allclose(lp.exp().sum(-1), torch.ones(3), atol=1e-4)


def test_bad_requests_raise(tiny_pair):
    _, artifact = tiny_pair
    with NativeEngine.from_artifact(artifact, ctx=16) as engine:
        with pytest.raises(RuntimeError, match="outside the vocabulary"):
            engine.logits([1, 256])
        with pytest.raises(RuntimeError, match="exceeds the context length 16"):
            engine.logits(list(range(17)))
    with pytest.raises(RuntimeError, match="threads must be at least 1"):
        NativeEngine.from_artifact(artifact, threads=0)
    broken = make_artifact(tiny_llama(seed=3), seed=4)
    del broken.linears["model.layers.1.mlp.up_proj"]
    with pytest.raises(RuntimeError, match="model.layers.1.mlp.up_proj: codes missing"):
        NativeEngine.from_artifact(broken).logits([1, 2])
