"""The benchmarks' rows in the report (`make bench-runtime`, `bench-pipeline`, `bench-quant`, `bench-scale`,
`bench-baselines`, `bench-paper-shape`; harness/bench/): the latest run of each, one table per benchmark with the median [min–max] of
every metric, the ratios the benchmark recorded against its peer among them, and the CPU, commit and load average it
ran with.

These are speed measurements of this host, not comparisons with the paper (Figures 13 and 4 compare the packing
benchmark, `bench-unpack`, with the paper): the section carries no verdict.
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from experiments import paper_values, rules, selection
from experiments.base import BenchmarkArtifact, register_artifact
from experiments.output import Section, fmt, md_table

NAME = "benchmarks"
TITLE = "Benchmarks - this host's speed: engines, pipeline policies, quantization, baselines"
EXPERIMENTS = ("bench-runtime", "bench-pipeline", "bench-quant", "bench-scale", "bench-baselines", "bench-paper-shape")
KEYS = ["system", "model", "quantizer", "bits", "pipeline", "prompt_tokens", "flash_emulated_mbps", "variant", "soc", "metric",
        "unit"]


def measure(store=None) -> None:
    """Run each benchmark (what `make reproduce-benchmarks` runs) that has no rows in the store yet."""
    import subprocess
    import sys

    from harness.runner.store import ResultsStore

    store = store or ResultsStore()
    for experiment in EXPERIMENTS:
        if not store.read(experiment).empty:
            print(f"[experiments] {experiment} already measured in {store.root}; delete its folder to measure again",
                  file=sys.stderr)
            continue
        module = f"harness.bench.{experiment.removeprefix('bench-').replace('-', '_')}"
        subprocess.run([sys.executable, "-m", module, f"--results={store.root}"], cwd=paper_values.REPO, check=True)


def load_rows(store) -> pd.DataFrame:
    return selection.current(selection.read_rows(store, EXPERIMENTS))


def table(rows: pd.DataFrame) -> pd.DataFrame:
    """Median [min–max] and count of every metric per configuration of one benchmark's latest run."""
    ok = rows[rows["status"] == "ok"].dropna(subset=["value"])
    keys = [k for k in KEYS if k in ok.columns and ok[k].notna().any()]
    out = []
    for key, g in ok.groupby(keys, dropna=False, sort=False):
        v = g["value"]
        cells = {k: ("" if pd.isna(x) else x) for k, x in zip(keys, key if isinstance(key, tuple) else (key,))}
        out.append({**cells, "median [min–max]": f"{fmt(v.median())} [{fmt(v.min())}–{fmt(v.max())}]", "n": len(v)})
    return pd.DataFrame(out)


def ran_on(rows: pd.DataFrame) -> str:
    """'AMD EPYC (2 cores; avx2, avx512_vnni), commit abc, 2026-12-04, load average 0.3–1.1'."""
    info = json.loads(rows["device_info"].dropna().iloc[0]) if rows["device_info"].notna().any() else {}
    loads = rows["load_avg_1m"].dropna() if "load_avg_1m" in rows.columns else pd.Series(dtype=float)
    parts = [f"{info.get('cpu', '?')} ({info.get('cores', '?')} cores; {', '.join(info.get('simd', [])) or 'no SIMD flags'})",
             selection.commits(rows), str(rows["time"].dropna().max())[:10]]
    if len(loads):
        parts.append(f"load average {loads.min():.2f}–{loads.max():.2f}")
    return ", ".join(p for p in parts if p)


def render(rows: pd.DataFrame, paper: pd.DataFrame | None, figures_dir: Path) -> Section:
    if rows.empty:
        return Section(NAME, TITLE, rules.NOT_RUN, "no benchmark has run",
                       "Not run yet: `make reproduce-benchmarks` (or one of `make bench-runtime`, `bench-pipeline`, "
                       "`bench-quant`, `bench-scale`, `bench-baselines`, `bench-paper-shape`: each prints its table and records "
                       "its rows here).\n")
    body = ["Speed on this host only (no paper values, no verdict); ratios (`ttft_ratio`) are against the peer "
            "named in the notes, measured in the same round.\n"]
    for experiment in EXPERIMENTS:
        mine = rows[rows["experiment"] == experiment]
        if mine.empty:
            body.append(f"**{experiment}**: not run (`make {experiment}`).\n")
            continue
        body += [f"**{experiment}** ({ran_on(mine)}):\n", md_table(table(mine))]
    return Section(NAME, TITLE, rules.INPUT, f"{rows['experiment'].nunique()} benchmark(s) in the store",
                   "\n".join(body))


@register_artifact
class Benchmarks(BenchmarkArtifact):
    NAME, TITLE, EXPERIMENTS = NAME, TITLE, EXPERIMENTS
    FILTERS = {}
    measure, load_rows, render = staticmethod(measure), staticmethod(load_rows), staticmethod(render)
