"""ScoredLM: lm-eval over an engine's scorer gives what lm-eval's own HFLM gives on the same model, and measures its
agreement with a reference scorer."""
import pytest
import torch

from harness.data.config import DatasetConfig
from harness.eval.accuracy import evaluate_accuracy
from harness.eval.scorer_lm import ScoredLM, torch_logprobs


def _values(rows):
    return {r.metric: r.value for r in rows}


@pytest.mark.parametrize("task", ["lambada-local", "hellaswag-local"])
def test_a_scorer_over_the_model_matches_hflm(corpus, tokenizer, tiny_model, task):
    dataset = DatasetConfig(name=task, shots=0, prompt_tokens_min=10, prompt_tokens_max=20, local_task=task,
                            local_items=12)
    theirs = _values(evaluate_accuracy(tiny_model, tokenizer, dataset, limit=6))
    lm = ScoredLM(torch_logprobs(tiny_model), tokenizer, max_length=512, reference=torch_logprobs(tiny_model))
    ours = _values(evaluate_accuracy(None, tokenizer, dataset, limit=6, lm=lm))
    assert ours.keys() == theirs.keys()
    for metric, value in theirs.items():
        assert ours[metric] == pytest.approx(value, rel=1e-4), metric
    agree = lm.agreement()
    assert agree["agreement_top1"] == 1.0 and agree["agreement_max_abs_loglik"] < 1e-4


def test_agreement_sees_a_different_reference(tokenizer, tiny_model):
    def noisy(ids, last):
        return torch.log_softmax(torch_logprobs(tiny_model)(ids, last) + 3 * torch.randn(last, len(tokenizer)), -1)

    lm = ScoredLM(torch_logprobs(tiny_model), tokenizer, max_length=512, reference=noisy)
    lm._score(tokenizer.encode("the quality of mercy"), tokenizer.encode(" is not strained"), check=True)
    agree = lm.agreement()
    assert agree["agreement_top1"] < 1.0 and agree["agreement_max_abs_loglik"] > 0.1
    with pytest.raises(NotImplementedError, match="does not generate"):
        lm.generate_until([])


def test_the_reference_checks_only_the_first_contexts_it_is_given(corpus, tokenizer, tiny_model):
    """reference_groups=2: the reference scores the requests of the first two contexts (items) and no others; the
    engine's own numbers are those of an unbounded check."""
    calls = []

    def counted(ids, last):
        calls.append(len(ids))
        return torch_logprobs(tiny_model)(ids, last)

    dataset = DatasetConfig(name="hellaswag-local", shots=0, prompt_tokens_min=10, prompt_tokens_max=20,
                            local_task="hellaswag-local", local_items=12)
    bounded = ScoredLM(torch_logprobs(tiny_model), tokenizer, max_length=512, reference=counted, reference_groups=2)
    every = ScoredLM(torch_logprobs(tiny_model), tokenizer, max_length=512, reference=torch_logprobs(tiny_model))
    ours, all_checked = (_values(evaluate_accuracy(None, tokenizer, dataset, limit=5, lm=lm)) for lm in (bounded, every))
    assert ours == all_checked
    assert bounded.checked_groups == 2 and len(calls) == len(bounded.loglik_diffs) == 8  # 2 items x 4 endings
    assert len(every.loglik_diffs) == 20 and every.checked_groups == 5
