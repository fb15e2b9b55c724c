"""Prefix-shared scoring (harness/eval/scorer_lm.py): a multiple-choice group's context runs once and every
continuation is scored from its KV cache, with the log-likelihoods of scoring each request from scratch. The runtime
gives them bit for bit (NativeEngine.logprobs_after: the context through ef_engine_score_after, the continuations in
one pass as sibling branches through ef_engine_score_branches), the float torch model within rounding."""
from __future__ import annotations

import pytest
import torch

from harness.engine.capi import NativeEngine
from harness.engine.build import NativeError
from harness.eval.scorer_lm import ScoredLM, torch_logprobs, torch_logprobs_after
from harness.pack import pack_artifact
from harness.quant.fakequant import build_fakequant_model
from tests.runtime.conftest import make_artifact, tiny_llama

pytestmark = pytest.mark.native

CONTEXT = [3, 17, 99, 4, 250, 8, 8, 1, 42, 77, 5, 61, 200, 9]  # ids < 256, the tiny vocabulary
# lm-eval's requests: (key, context ids, continuation ids); two groups, one of a single request
REQUESTS = [(None, CONTEXT, [7, 30, 12]), (None, CONTEXT, [31]), (None, CONTEXT, [150, 2, 2, 90, 6]),
            (None, [5, 6], [40, 41]), (None, CONTEXT, [8, 8])]


class _Tokenizer:
    eos_token_id = 0


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    model = tiny_llama(seed=5, tie=False)
    artifact = make_artifact(model, seed=6)
    return model, artifact, pack_artifact(artifact, tmp_path_factory.mktemp("packed") / "tiny.efpk")


@pytest.mark.parametrize("chunk", [4, 128])  # continuations inside the context's last chunk, and across chunks
def test_runtime_shared_prefix_is_bit_identical(packed, chunk):
    with NativeEngine.open(packed[2], threads=2, chunk=chunk) as engine:
        alone = ScoredLM(engine.logprobs, _Tokenizer(), max_length=64)
        want = alone._loglikelihood_tokens(REQUESTS)
        shared = ScoredLM(engine.logprobs, _Tokenizer(), max_length=64, shared=engine.logprobs_after)
        got = shared._loglikelihood_tokens(REQUESTS)
        full = engine.logprobs(CONTEXT + [150, 2, 2, 90])
        rows = engine.logprobs_after(CONTEXT, [[150, 2, 2, 90], []])
    assert got == want  # the same floats, not merely close
    assert torch.equal(rows[0], full[len(CONTEXT) - 1:]) and torch.equal(rows[1], full[len(CONTEXT) - 1:][:1])
    assert (shared.stats.shared, shared.stats.alone, shared.stats.groups) == (4, 1, 1)
    assert shared.stats.context_tokens_saved == 3 * len(CONTEXT)
    assert (alone.stats.shared, alone.stats.alone) == (0, 5)


def test_a_group_that_does_not_fit_is_scored_alone(packed):
    with NativeEngine.open(packed[2], threads=1) as engine:
        want = ScoredLM(engine.logprobs, _Tokenizer(), max_length=12)._loglikelihood_tokens(REQUESTS)
        lm = ScoredLM(engine.logprobs, _Tokenizer(), max_length=12, shared=engine.logprobs_after)
        assert lm._loglikelihood_tokens(REQUESTS) == want  # the context is cut from the left: no common prefix
    assert (lm.stats.shared, lm.stats.alone) == (0, 5)


def test_torch_reference_shared_prefix_within_rounding(packed):
    model, artifact, path = packed
    fq = build_fakequant_model(artifact, model)
    with NativeEngine.open(path, threads=1) as engine:
        alone = ScoredLM(engine.logprobs, _Tokenizer(), 64, reference=torch_logprobs(fq))
        alone._loglikelihood_tokens(REQUESTS)
        lm = ScoredLM(engine.logprobs, _Tokenizer(), 64, reference=torch_logprobs(fq), shared=engine.logprobs_after,
                      reference_shared=torch_logprobs_after(fq))
        lm._loglikelihood_tokens(REQUESTS)
    assert lm.top1_total == alone.top1_total == 13
    assert lm.top1_same == alone.top1_same
    assert lm.loglik_diffs == pytest.approx(alone.loglik_diffs, abs=1e-4)  # |runtime - reference| per request
    scratch = torch_logprobs(fq)(CONTEXT + [7, 30], 3)
    assert torch.allclose(torch_logprobs_after(fq)(CONTEXT, [[7, 30]])[0], scratch, atol=1e-4)


def test_keep_errors_name_the_problem(packed):
    with NativeEngine.open(packed[2], threads=1) as engine:
        with pytest.raises(NativeError, match="nothing to keep|cannot keep"):
            engine.logits([1, 2], keep=3)
        engine.logits(CONTEXT, 1, reserve=2)
        with pytest.raises(NativeError, match="exceed the cache"):
            engine.logits([1, 2, 3], keep=len(CONTEXT))
        with pytest.raises(NativeError, match="last must be in"):
            engine.logits([1, 2], 3)


@pytest.mark.parametrize("chunk", [4, 128])  # branches longer than a chunk run as one chunk all the same
def test_branches_in_one_pass_are_each_branch_alone(packed, chunk):
    branches = [[7, 30, 12], [31], [150, 2, 2, 90, 6, 6, 1], [8, 8]]
    with NativeEngine.open(packed[2], threads=2, chunk=chunk) as engine:
        engine.logits(CONTEXT, 1, reserve=7)
        alone = [engine.logits(b, keep=len(CONTEXT)) for b in branches]
        together = engine.branch_logits(len(CONTEXT), branches)
        after = engine.logits([99, 98], keep=len(CONTEXT))  # the sequence is the context again
        fresh = engine.logits(CONTEXT + [99, 98], 2)
    assert together.shape == (13, engine.vocab_size)
    assert torch.equal(together, torch.cat(alone))  # the same floats, not merely close
    assert torch.equal(after, fresh)


def test_branch_errors_name_the_problem(packed):
    with NativeEngine.open(packed[2], threads=1) as engine:
        with pytest.raises(NativeError, match="nothing to keep|cannot keep"):
            engine.branch_logits(2, [[1, 2]])
        engine.logits(CONTEXT, 1, reserve=3)
        with pytest.raises(NativeError, match="exceeds the context"):
            engine.branch_logits(len(CONTEXT), [[1], [1, 2, 3, 4]])  # the longest branch must fit the reserve
        with pytest.raises(NativeError, match="cannot keep"):
            engine.branch_logits(len(CONTEXT) + 1, [[1]])
        with pytest.raises(NativeError, match="at least one token"):
            engine.branch_logits(len(CONTEXT), [[1, 2], []])
        assert engine.branch_logits(len(CONTEXT), [[1, 2, 3], [4]]).shape == (4, engine.vocab_size)
