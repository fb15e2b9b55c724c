"""Figure 13: the weightlet (SIMD-friendly) packing format against INT4/INT8 mixed padding and K-Quant-like bit planes:
load time, unpack time and end-to-end latency at 5-7 average bits. Measured by the packing benchmark (packbench.py).
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from experiments import common, packbench
from experiments.common import Section, md_table

NAME = "fig13"
TITLE = "Figure 13 - packing formats: load, unpack and end-to-end latency"
EXPERIMENTS = ()
measure = packbench.measure


def load_rows(store) -> pd.DataFrame:
    return pd.DataFrame([{"path": str(p), "payload": d} for p, d in packbench.results(store)],
                        columns=["path", "payload"])


def paper_table(paper: pd.DataFrame | None) -> str:
    if paper is None:
        return ""
    return "Paper (Llama3-8B, 5-7 bits):\n\n" + md_table(paper[["packing", "versus", "metric", "value", "unit", "notes"]])


def render(rows: pd.DataFrame, paper: pd.DataFrame | None, figures_dir: Path) -> Section:
    if rows.empty:
        return Section(NAME, TITLE, common.NOT_RUN, "packing benchmark not available (no output of "
                       f"`make {packbench.BENCH_TARGET}` in the store)",
                       f"Not run yet: `make reproduce-{NAME}` (runs `make {packbench.BENCH_TARGET}`).\n\n"
                       + paper_table(paper))
    raise NotImplementedError("fig13: bench output format not wired yet")
