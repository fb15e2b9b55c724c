"""Measure and draw one artifact: its sweep through the runner (resumable), then its renderer over the store's rows."""
from __future__ import annotations

import inspect
import sys
from pathlib import Path

import pandas as pd

from experiments import get, multirun, output, paper_values, selection
from experiments.base import BenchmarkArtifact
from experiments.output import Section
from harness.cache_ledger import ledger_at, report as cache_report
from harness.runner.store import ResultsStore

LEDGER_FILE = "cache-ledger.jsonl"  # beside the results: what each reproduction took from the caches and made

RESULTS_DIR = paper_values.REPO / "results"


class SweepParameterError(ValueError):
    """A sweep parameter the artifact does not take."""


def accepted(name: str, params: dict) -> dict:
    """The subset of `params` that `name`'s sweep takes (for `run all`, where options are shared)."""
    artifact = get(name)
    if isinstance(artifact, BenchmarkArtifact):
        takes = set(inspect.signature(artifact.measure).parameters) - {"store"}
        return {k: v for k, v in params.items() if k in takes}
    return {k: v for k, v in params.items() if k in inspect.signature(artifact.sweep).parameters}


def points(name: str, overrides: list[str] = (), **params) -> list[list[str]]:
    """The artifact's sweep with `params` (checked against its signature) and `overrides` appended to every point."""
    artifact = get(name)
    if isinstance(artifact, BenchmarkArtifact):
        raise SweepParameterError(f"{name} is measured by a benchmark, not a sweep")
    accepted = inspect.signature(artifact.sweep).parameters
    unknown = sorted(set(params) - set(accepted))
    if unknown:
        raise SweepParameterError(f"{name}'s sweep takes {', '.join(accepted)}; not {', '.join(unknown)}")
    return [p + list(overrides) for p in artifact.sweep(**params)]


def rows_of(name: str, store: ResultsStore, **params) -> pd.DataFrame:
    """The store's rows this artifact draws, narrowed by the sweep parameters that name a column."""
    artifact = get(name)
    if isinstance(artifact, BenchmarkArtifact):
        rows = artifact.load_rows(store)
    else:  # only the latest successful attempt of each configuration counts (selection.current)
        rows = selection.current(selection.read_rows(store, artifact.EXPERIMENTS))
    for column, param in artifact.FILTERS.items():
        if params.get(param) and column in rows.columns:
            keep = rows[column].isin(list(params[param]))
            if column == "system":  # rows of no engine (FP16 references, fake-quant stand-ins) stay beside them
                keep |= rows[column].isna()
            if column == "dataset":  # fidelity rows belong to no task: their held-out text stays beside every task
                from harness.eval.fidelity import HELD_OUT

                keep |= rows[column] == HELD_OUT
            rows = rows[keep]
    return rows


def render(name: str, store: ResultsStore | None = None, out_dir: Path = RESULTS_DIR, **params) -> Section:
    artifact = get(name)
    store = store or ResultsStore()
    rows = rows_of(name, store, **params)
    section = artifact.render(rows, paper_values.load_paper(name), Path(out_dir) / "figures")
    section.context = section.context or "; ".join(selection.labels(rows))
    return section


def run(name: str, store: ResultsStore | None = None, out_dir: Path = RESULTS_DIR, overrides: list[str] = (),
        launcher: str | None = None, **params) -> Section:
    """Measure (sweep or benchmark), then render. Failing configurations are recorded as rows; the sweep goes on.
    With `launcher` (local_parallel: a pool of worker processes here; or a conf/hydra/launcher option, through
    `python -m harness --multirun`) the points that time nothing run through it, after the timed ones (TTFT) and the
    references others pair with, which run here one at a time in the artifact's order."""
    from harness.runner.sweep import run_sweep

    artifact = get(name)
    store = store or ResultsStore()
    if isinstance(artifact, BenchmarkArtifact):
        unknown = sorted(set(params) - set(accepted(name, params)))
        if unknown:
            raise SweepParameterError(f"{name} is measured by a benchmark that takes no {', '.join(unknown)}")
        try:
            artifact.measure(store, **params)
        except output.NotAvailable as e:  # rendered as "not run" with this reason
            print(f"[experiments] {name}: not run: {e}", file=sys.stderr)
    else:
        with ledger_at(Path(store.root) / LEDGER_FILE) as recorded:
            if launcher:  # timed points and references here in the artifact's order, the others through the launcher
                first, rest = multirun.split_timed(points(name, overrides, **params))
                if first:
                    run_sweep(first, store, desc=f"{name}, timed points and references")
                multirun.launch(rest, launcher, store.root, desc=name)
            else:
                counts = run_sweep(points(name, overrides, **params), store, desc=name)
                print(f"[experiments] {name}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())),
                      file=sys.stderr)
            print(f"[experiments] {name}: preparation\n  " + cache_report(recorded()).replace("\n", "\n  "),
                  file=sys.stderr)
    return render(name, store, out_dir, **params)
