"""Figure 4: the precision mix EdgeFlow's allocation gives a model, and the load and unpack times of INT8 padding,
INT4/INT8 mixed padding and K-Quant-like bit planes for it (2 loading threads, 1 unpacking thread, layer by layer).
Measured by the packing benchmark (packbench.py).
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from experiments import common, fig13, packbench
from experiments.common import Section, md_table

NAME = "fig4"
TITLE = "Figure 4 - precision mix and the load/unpack cost of padded and bit-plane formats"
EXPERIMENTS = ()
measure = packbench.measure
load_rows = fig13.load_rows


def render(rows: pd.DataFrame, paper: pd.DataFrame | None, figures_dir: Path) -> Section:
    if rows.empty:
        ref = "" if paper is None else "Paper (Llama3-8B):\n\n" + md_table(paper[["packing", "bits", "metric", "value", "unit", "notes"]])
        return Section(NAME, TITLE, common.NOT_RUN, "packing benchmark not available (no output of "
                       f"`make {packbench.BENCH_TARGET}` in the store)",
                       f"Not run yet: `make reproduce-{NAME}` (runs `make {packbench.BENCH_TARGET}`).\n\n" + ref)
    raise NotImplementedError("fig4: bench output format not wired yet")
