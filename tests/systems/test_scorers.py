"""Each engine's own forward pass as a scorer (System.open_scorer): it computes the same distributions as the model it
was converted from, within its quantization's error, and refuses bad requests with errors naming them."""
import pytest
import torch

from harness.devices import get_device
from harness.measure.cold import EngineError
from harness.systems import NotRun, get_system


def _reference(checkpoint, ids):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32)
    with torch.no_grad():
        return torch.log_softmax(model(torch.tensor([ids])).logits[0].float(), -1)


def _kl(p_log, q_log) -> float:
    return float((p_log.exp() * (p_log - q_log)).sum(-1).mean())


IDS = [504, 3575, 282, 4649, 314, 7042, 30, 378, 3575, 282, 4739, 314, 11790, 28, 284, 260, 3575, 282, 10733, 314]


def test_a_system_without_a_scorer_says_so():
    from harness.systems.base import Prepared

    system = get_system({"name": "llmnpu"})
    with pytest.raises(NotRun, match="no scorer"):
        system.open_scorer(Prepared("llmnpu", [], {}, ""), ctx=64)


@pytest.mark.real_model
def test_llamacpp_scores_its_f16_gguf_as_the_torch_model_does(tiny_checkpoint, tmp_path):
    from harness.systems import llamacpp_build as build
    from harness.systems.llamacpp_scorer import LlamaCppScorer

    system = get_system({"name": "llamacpp", "threads": 2})
    gguf = build.model_gguf(tiny_checkpoint, "tiny-fig10-test", "F16", system.cfg.llamacpp_version)
    ref = _reference(tiny_checkpoint, IDS)
    with LlamaCppScorer.open(gguf, ctx=64, threads=2) as scorer:
        every = scorer.logits(IDS)
        assert every.shape == ref.shape and _kl(ref, every) < 1e-3
        assert torch.equal(scorer.logprobs(IDS, 3), every[-3:])  # the last rows only, the same numbers
        # endings after a context decoded once: the rows scoring each from scratch gives
        prefix, tails = IDS[:12], [IDS[12:19], IDS[12:15], [], IDS[15:17]]
        shared = scorer.logprobs_after(prefix, tails)
        for tail, rows in zip(tails, shared):
            assert torch.equal(rows, scorer.logprobs(prefix + tail, 1 + len(tail))), tail
        with pytest.raises(EngineError, match="cannot keep 30 positions of a sequence of 14"):
            scorer._request(IDS[:3], 1, keep=30)
        assert torch.equal(scorer.logprobs_after(prefix, tails[:1])[0], shared[0])  # and it still serves
        with pytest.raises(EngineError, match="outside the vocabulary"):
            scorer.logprobs([10 ** 7], 1)
        assert scorer.logprobs(IDS[:4], 1).shape == (1, ref.shape[1])  # still serving after a refused request
        with pytest.raises(ValueError, match="do not fit"):
            scorer.logprobs(list(range(65)), 1)
        with pytest.raises(ValueError, match="1 <= last"):
            scorer.logprobs(IDS, 0)
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\0" * 64)
    with pytest.raises(EngineError, match="could not load"):
        LlamaCppScorer.open(broken, ctx=64, threads=2)


@pytest.mark.real_model
def test_mnn_scores_its_export_close_to_the_torch_model(default_model_spec):
    from harness.models.zoo import checkpoint_dir

    system = get_system({"name": "mnn", "threads": 2})
    prepared = system.prepare(default_model_spec, 8, get_device({"name": "local"}))
    ref = _reference(checkpoint_dir(default_model_spec), IDS)
    with system.open_scorer(prepared, ctx=64) as scorer:
        every = scorer.logits(IDS)
        assert every.shape == ref.shape and _kl(ref, every) < 0.2  # INT8 weights: close, not equal
        assert (every.argmax(-1) == ref.argmax(-1)).float().mean() > 0.7
        assert torch.allclose(scorer.logprobs(IDS, 2), every[-2:])  # each request starts from an empty cache
        assert torch.allclose(scorer.logprobs(IDS[:5], 5), every[:5], atol=1e-5)
        # endings after a context prefilled once, each erased again before the next: the bits of scoring from scratch
        prefix, tails = IDS[:12], [IDS[12:19], IDS[12:15], [], IDS[15:17]]
        shared = scorer.logprobs_after(prefix, tails)
        for tail, rows in zip(tails, shared):
            assert torch.equal(rows, scorer.logprobs(prefix + tail, 1 + len(tail))), tail
        assert torch.allclose(scorer.logprobs(IDS, 2), every[-2:])  # and a request after them starts clean
