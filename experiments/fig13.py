"""Figure 13: the weightlet (SIMD-friendly) packing format against INT4/INT8 mixed padding and K-Quant-like bit planes:
cold load time, unpack time and load+unpack end to end, at 5-7 average bits. Measured by the packing benchmark
(packbench.py); ours are ratios of medians per bit-width, averaged over the bit-widths the paper uses (5-7).
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from experiments import common, packbench
from experiments.base import BenchmarkArtifact, register_artifact
from experiments.common import Section, fmt, md_table

NAME = "fig13"
TITLE = "Figure 13 - packing formats: load, unpack and end-to-end latency"
EXPERIMENTS = ()
PACKINGS = ("weightlet", "int4int8", "kquant")
PAPER_BITS = (5, 6, 7)
measure = packbench.measure
# paper metric -> the bench metric whose ratio (other format / weightlet) it is
RATIOS = {"load_speedup": "cold_load_seconds", "unpack_speedup": "unpack_seconds", "e2e_speedup": "e2e_seconds"}


def load_rows(store) -> pd.DataFrame:
    return packbench.rows(store)


def ours(med: pd.DataFrame, metric: str, versus: str) -> tuple[float, str]:
    """Our value of a paper metric (mean over the paper's bit-widths present, else over all) and which bits."""
    bits = sorted(b for b in med["bits"].unique() if b in PAPER_BITS) or sorted(med["bits"].unique())
    if metric in RATIOS:
        per = [packbench.value(med, b, versus, RATIOS[metric]) / packbench.value(med, b, "weightlet", RATIOS[metric])
               for b in bits]
    elif metric == "extra_unpack_s_max":
        per = [packbench.value(med, b, "weightlet", "unpack_seconds") - packbench.value(med, b, versus, "unpack_seconds")
               for b in bits]
        return (max(per) if per else math.nan), f"max over {_bits(bits)}"
    elif metric == "simd_instructions_per_weight":
        bits = sorted(med["bits"].unique())  # the paper's is a model-wide average
        per = [packbench.value(med, b, "weightlet", "instructions_per_weight") for b in bits]
    else:
        return math.nan, ""
    per = [p for p in per if math.isfinite(p)]
    return (float(np.mean(per)) if per else math.nan), f"mean over {_bits(bits)}"


def _bits(bits) -> str:
    return f"{min(bits):g}–{max(bits):g} bits" if len(bits) > 1 else f"{bits[0]:g} bits"


def paper_table(paper: pd.DataFrame | None) -> str:
    if paper is None:
        return ""
    return "Paper (Llama3-8B, 5-7 bits):\n\n" + md_table(paper[["packing", "versus", "metric", "value", "unit", "notes"]])


def render(rows: pd.DataFrame, paper: pd.DataFrame | None, figures_dir: Path) -> Section:
    if rows.empty:
        return Section(NAME, TITLE, common.NOT_RUN, "packing benchmark not available (no output of "
                       f"`make {packbench.BENCH_TARGET}` in the store)",
                       f"Not run yet: `make reproduce-{NAME}` (runs the packing benchmark, `make {packbench.BENCH_TARGET}`).\n\n"
                       + paper_table(paper))
    med = packbench.medians(rows)
    models = ", ".join(sorted(rows["model"].dropna().unique())) if "model" in rows else "?"
    load = rows["loadavg"].dropna() if "loadavg" in rows else pd.Series(dtype=float)
    tags = f"model shape {models}" + (f"; load average {load.min():.1f}–{load.max():.1f}" if len(load) else "")
    figures, no_figure = packbench.plot(NAME, rows, figures_dir)
    lines, verdicts = [], []
    caps = packbench.cap_reasons(rows)
    for p in (paper.itertuples() if paper is not None else []):
        mine, over = ours(med, p.metric, p.versus if isinstance(p.versus, str) else "")
        if p.metric == "extra_unpack_s_max":
            v = "info (absolute seconds: model sizes differ)"
        elif p.metric == "simd_instructions_per_weight":
            # fewer is better: at most the paper's count plus the tolerance reproduces it
            v = common.cap(common.at_most_verdict(mine, p.value), caps)
            verdicts.append(v)
        else:
            v = common.ratio_verdict(mine, p.value, caps=caps)
            verdicts.append(v)
        lines.append({"metric": p.metric, "vs": p.versus if isinstance(p.versus, str) else "", "ours": fmt(mine),
                      "ours over": over, "paper": f"{p.value:g}", "verdict": v})
    verdict, count = common.overall(verdicts)
    med_table = med[med["metric"].isin(["cold_load_seconds", "unpack_seconds", "e2e_seconds",
                                        "instructions_per_weight"])]
    wide = med_table.assign(cell=[f"{fmt(v)} ({q})" if m in ("unpack_seconds", "instructions_per_weight") else fmt(v)
                                  for v, q, m in zip(med_table["value"], med_table["path"], med_table["metric"])])
    wide = wide.pivot_table(index=["bits", "packing"], columns="metric", values="cell", aggfunc="first").reset_index()
    figure = f"![{TITLE}](figures/{figures[0].name})\n\n" if figures else f"{no_figure}\n\n"
    body = (figure + f"Measured on {tags} (random codes in the paper's Figure 4a bit mix, not a quantized model: the speed of "
            "loading and unpacking depends on bit-widths and shapes, not on code values). Ratios are other format / "
            "weightlet (> 1: weightlet faster). Instructions per weight are counted by callgrind on this host's "
            "SIMD path (the paper's: Neon 128-bit). Medians of single benchmark runs per bit-width, no interval: "
            f"verdicts are capped at *qualitative* ({'; '.join(caps)}).\n\n"
            + md_table(pd.DataFrame(lines)) + "\n**Our medians** (seconds; unpack path in brackets):\n\n"
            + md_table(wide))
    return Section(NAME, TITLE, verdict, count, body, figures)


@register_artifact
class Fig13(BenchmarkArtifact):
    NAME, TITLE, EXPERIMENTS = NAME, TITLE, EXPERIMENTS
    measure, load_rows, render = staticmethod(measure), staticmethod(load_rows), staticmethod(render)
