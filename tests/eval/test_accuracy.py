import math

import pytest

from harness.data import hub
from harness.data.config import DatasetConfig, load_dataset_config
from harness.data.hub import DatasetUnavailable
from harness.data.tasks import PROXY_LABEL
from harness.eval import accuracy
from harness.eval.accuracy import evaluate_accuracy

BUILTIN = ("lambada", "winogrande", "openbookqa", "mmlu", "hellaswag")


def _local(task, items=12):
    return DatasetConfig(name=task, shots=0, prompt_tokens_min=10, prompt_tokens_max=20, local_task=task,
                         local_items=items)


def _check_rows(rows, task, metrics, n):
    assert {r.metric for r in rows} == set(metrics)
    for r in rows:
        assert (r.task, r.dataset, r.n, r.shots, r.protocol) == (task, task, n, 0, PROXY_LABEL)
        assert math.isfinite(r.value) and r.stderr is not None
        if r.metric.startswith("acc"):  # a share of the n items: k / n exactly, not an average over other items
            assert 0.0 <= r.value <= 1.0 and abs(r.value * n - round(r.value * n)) < 1e-9
        else:
            assert r.value > 1.0  # perplexity of a random model over a 400-token vocabulary


def test_local_tasks_run_through_lm_eval_on_a_tiny_random_model(corpus, tokenizer, tiny_model, monkeypatch):
    import torch.utils.collect_env

    reports = []  # torch's environment report (lm-eval's add_env_info): subprocesses whose output no row keeps
    monkeypatch.setattr(torch.utils.collect_env, "get_pretty_env_info", lambda: reports.append(1) or "")
    rows = evaluate_accuracy(tiny_model, tokenizer, _local("lambada-local"), limit=6)
    assert reports == []
    _check_rows(rows, "lambada-local", ("acc", "perplexity"), 6)
    by_metric = {r.metric: r for r in rows}
    acc = by_metric["acc"]  # one 0/1 per document, by lm-eval's doc_id: what pairs two models item by item
    assert sorted(acc.per_item) == list(range(6)) and set(acc.per_item.values()) <= {0.0, 1.0}
    assert sum(acc.per_item.values()) / 6 == pytest.approx(acc.value)
    assert by_metric["perplexity"].per_item is None  # a document's log-likelihood is not a value of this metric
    _check_rows(evaluate_accuracy(tiny_model, tokenizer, _local("hellaswag-local")), "hellaswag-local",
                ("acc", "acc_norm"), 12)


@pytest.mark.parametrize("name", BUILTIN)
def test_builtin_tasks_fail_at_once_offline_naming_the_task(name, monkeypatch):
    monkeypatch.setattr(hub, "hub_status", lambda: "cannot connect to huggingface.co:443 (no route)")
    cfg = load_dataset_config(name)

    def asked_the_hub(task):  # datasets would retry for ~25 s before failing: the error must come before it is asked
        raise AssertionError(f"the hub was asked for {task!r}")
    monkeypatch.setattr(accuracy, "_loaded_builtin", asked_the_hub)
    with pytest.raises(DatasetUnavailable, match=rf"lm-eval task '{cfg.lm_eval_task}' needs the Hugging Face hub"):
        evaluate_accuracy(model=None, tokenizer=None, dataset=cfg)


@pytest.mark.real_model
def test_default_model_on_the_local_tasks(default_model_spec):
    from harness.models.zoo import load_model

    model, tokenizer = load_model(default_model_spec)
    rows = {(r.task, r.metric): r for name in ("lambada-local", "hellaswag-local")
            for r in evaluate_accuracy(model, tokenizer, load_dataset_config(name), limit=8)}
    assert rows[("lambada-local", "acc")].n == 8 and rows[("lambada-local", "perplexity")].value < 1000
    assert rows[("hellaswag-local", "acc_norm")].protocol == PROXY_LABEL


def test_tidy_results_of_a_group_counts_every_subtask():
    from harness.eval.accuracy import tidy_results

    out = {"results": {"mmlu": {"alias": "mmlu", "acc,none": 0.25, "acc_stderr,none": 0.01},
                       "mmlu_anatomy": {"acc,none": 0.5, "acc_stderr,none": "N/A"}},
           "group_subtasks": {"mmlu": ["mmlu_anatomy", "mmlu_law"]},
           "n-samples": {"mmlu_anatomy": {"original": 135, "effective": 10}, "mmlu_law": {"effective": 20}},
           "n-shot": {"mmlu": 5}}
    [row] = tidy_results(out, "mmlu", load_dataset_config("mmlu"), "p")
    assert (row.task, row.metric, row.value, row.stderr, row.n, row.shots) == ("mmlu", "acc", 0.25, 0.01, 30, 5)
    [sub] = tidy_results(out, "mmlu_anatomy", load_dataset_config("mmlu"), "p")
    assert sub.stderr is None and sub.n == 10
