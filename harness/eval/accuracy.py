"""Accuracy of an in-memory model through lm-eval: the local proxy tasks offline, the builtin tasks online.

The model is whatever torch module the caller holds (FP16 reference, fake-quant, ...), wrapped without a copy as
`HFLM(pretrained=model, tokenizer=tokenizer)`. A dataset config names either a local task (`lambada-local`,
`hellaswag-local`: generated from the corpus, see harness/data/tasks.py) or a builtin lm-eval task with the paper's
shot count (Table 3). Builtin tasks need the Hugging Face hub (or its local cache, with HF_DATASETS_OFFLINE=1): when
neither can serve them they fail at once with `DatasetUnavailable` (harness/data/hub.py), never after datasets' ~25 s
of retries.
"""
from __future__ import annotations

import contextlib
import os
from dataclasses import asdict, dataclass
from unittest import mock

from harness.data.config import DatasetConfig
from harness.data.corpus import load_corpus
from harness.data.hub import load_from_hub
from harness.data.tasks import PROXY_LABEL, write_local_tasks

BUILTIN_PROTOCOL = "lm-eval {task}, {shots}-shot (paper Table 3)"


@dataclass(frozen=True)
class AccuracyResult:
    dataset: str  # the config's name, e.g. "lambada-local"
    task: str  # the lm-eval task that ran
    metric: str  # "acc", "acc_norm", "perplexity"
    value: float
    stderr: float | None
    n: int  # documents evaluated
    shots: int
    protocol: str  # PROXY_LABEL for local tasks; BUILTIN_PROTOCOL otherwise
    # the metric per document, by lm-eval's doc_id, for metrics that are a share of documents (acc: 0 or 1 each):
    # what pairs two models' results item by item (experiments/fig12.py); None for others (lambada's perplexity,
    # whose per-document value is a log-likelihood) and for groups
    per_item: dict[int, float] | None = None

    def row(self) -> dict:
        return {k: v for k, v in asdict(self).items() if k != "per_item"}


def evaluate_accuracy(model, tokenizer, dataset: DatasetConfig, limit: int | None = None,
                      batch_size: int = 8, lm=None) -> list[AccuracyResult]:
    """Run one dataset's task on the model (or on `lm`, an lm-eval LM such as harness.eval.scorer_lm.ScoredLM over
    another engine; then `model` is unused); `limit` caps the documents (for speed; None = all)."""
    import lm_eval
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    if dataset.local_task:
        include = write_local_tasks(load_corpus(), seed=dataset.seed, n_items=dataset.local_items)
        task, protocol = dataset.local_task, PROXY_LABEL
        manager = TaskManager(include_path=str(include), include_defaults=False)  # indexing lm-eval's own: ~10 s
    else:
        task = dataset.lm_eval_task
        protocol = BUILTIN_PROTOCOL.format(task=task, shots=dataset.shots)
        manager = load_from_hub(f"lm-eval task {task!r}", lambda: _loaded_builtin(task),
                                "use a local proxy task (dataset=lambada-local or dataset=hellaswag-local)")
    lm = lm or HFLM(pretrained=model, tokenizer=tokenizer, batch_size=batch_size, device=str(model.device))
    # lm-eval bootstraps the stderr of some metrics (lambada's perplexity) in a forked Pool(cpu_count); its
    # terminate() can hang for good on a worker blocked on the pool's queue lock (seen: a SLURM task stuck 10 min),
    # and forking a process that runs torch's threads is unsafe anyway. In process, 1000 draws take well under 1 s.
    os.environ["DISABLE_MULTIPROC"] = "1"
    with _without_environment_report():
        out = lm_eval.simple_evaluate(model=lm, tasks=[task], num_fewshot=dataset.shots, limit=limit,
                                      task_manager=manager, log_samples=True, bootstrap_iters=1000,
                                      random_seed=dataset.seed, fewshot_random_seed=dataset.seed)
    return tidy_results(out, task, dataset, protocol)


def _without_environment_report():
    """lm-eval ends every evaluation with torch's environment report (`add_env_info`: `pip list` and a dozen other
    probes in subprocesses, 0.35-0.55 s a call on the Intel host, once per accuracy point: about 300 in
    `make reproduce-all`). None of it reaches our rows, whose provenance is the store's own columns: skip it."""
    import lm_eval.evaluator

    if not hasattr(lm_eval.evaluator, "add_env_info"):  # an lm-eval that no longer collects it
        return contextlib.nullcontext()
    return mock.patch.object(lm_eval.evaluator, "add_env_info", lambda results: None)


def tidy_results(out: dict, task: str, dataset: DatasetConfig, protocol: str) -> list[AccuracyResult]:
    """The task's row of lm-eval's nested dict ({"results": {task: {"acc,none": v, "acc_stderr,none": s}}}) as one
    AccuracyResult per metric. For a group (mmlu) that is the group's aggregate, over all its subtasks' documents."""
    metrics = out["results"][task]
    members = out.get("group_subtasks", {}).get(task) or [task]
    n = sum(int(out["n-samples"][t]["effective"]) for t in members if t in out["n-samples"])
    shots = int(out["n-shot"].get(task, dataset.shots))
    samples = out.get("samples", {}).get(task) if members == [task] else None
    rows = []
    for key, value in metrics.items():
        name, _, filter_name = key.partition(",")
        if not filter_name or name.endswith("_stderr") or not isinstance(value, (int, float)):
            continue  # "alias" and other strings; stderrs are attached to their metric below
        stderr = metrics.get(f"{name}_stderr,{filter_name}")
        stderr = float(stderr) if isinstance(stderr, (int, float)) else None  # lm-eval writes "N/A" when absent
        rows.append(AccuracyResult(dataset.name, task, name, float(value), stderr, n, shots, protocol,
                                   _per_item(samples, name, filter_name)))
    return rows


def _per_item(samples: list[dict] | None, metric: str, filter_name: str) -> dict[int, float] | None:
    """{doc_id: 0 or 1} of `metric` from lm-eval's logged samples (one dict per document, the metric's value under
    its name), or None unless every document's value is 0 or 1 (a share-of-documents metric such as acc)."""
    if not samples:
        return None
    picked = [s for s in samples if s.get("filter", filter_name) == filter_name]
    if not picked or not all(isinstance(s.get(metric), (int, float)) and s[metric] in (0, 1) for s in picked):
        return None
    return {int(s["doc_id"]): float(s[metric]) for s in picked}


def _loaded_builtin(task: str):
    """A TaskManager whose builtin `task` has been built once, which loads (and caches) its dataset."""
    from lm_eval.tasks import TaskManager, get_task_dict

    manager = TaskManager()
    get_task_dict([task], manager)
    return manager


def main(argv: list[str] | None = None) -> None:
    """python -m harness.eval.accuracy --model smollm2-135m --dataset lambada-local hellaswag-local [--limit N]"""
    import argparse
    import json
    import time

    from harness.data.config import load_dataset_config
    from harness.models.zoo import DEFAULT_MODEL, load_model, load_model_spec

    parser = argparse.ArgumentParser(description="FP16-reference accuracy of a zoo model (one JSON row per metric)")
    parser.add_argument("--model", default=DEFAULT_MODEL, help="a conf/model/<name>.yaml")
    parser.add_argument("--dataset", nargs="+", default=["lambada-local", "hellaswag-local"])
    parser.add_argument("--limit", type=int, default=None, help="documents per task (default: all)")
    parser.add_argument("--batch-size", type=int, default=8)
    args = parser.parse_args(argv)

    datasets = [load_dataset_config(name) for name in args.dataset]  # validate every config before loading a model
    spec = load_model_spec(args.model)
    model, tokenizer = load_model(spec)
    for dataset in datasets:
        start = time.monotonic()
        rows = evaluate_accuracy(model, tokenizer, dataset, limit=args.limit, batch_size=args.batch_size)
        seconds = time.monotonic() - start
        for row in rows:
            print(json.dumps({**row.row(), "model": spec.name, "model_note": spec.note, "seconds": round(seconds, 1)}),
                  flush=True)


if __name__ == "__main__":
    main()
