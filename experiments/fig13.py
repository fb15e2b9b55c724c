"""Figure 13: the weightlet (SIMD-friendly) packing format against INT4/INT8 mixed padding and K-Quant-like bit planes:
cold load time, unpack time and load+unpack end to end, at 5-7 average bits. Measured by the packing benchmark
(packbench.py); ours are ratios of medians per bit-width, averaged over the bit-widths the paper uses (5-7).
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from experiments import output, packbench, rules
from experiments.base import BenchmarkArtifact, register_artifact
from experiments.output import Section, fmt, md_table

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


def _stats(rows: pd.DataFrame, med: pd.DataFrame, bits, packing: str, metric: str) -> tuple[float, float, float]:
    """(median, min, max) in ms of one metric over the repetitions, on the unpack path the medians chose."""
    m = med[(med["bits"] == bits) & (med["packing"] == packing) & (med["metric"] == metric)]
    if m.empty:
        return math.nan, math.nan, math.nan
    r = rows[(rows["bits"] == bits) & (rows["packing"] == packing) & (rows["metric"] == metric)
             & (rows["path"] == m["path"].iloc[0])]["value"]
    return 1e3 * float(m["value"].iloc[0]), 1e3 * r.min(), 1e3 * r.max()


def draw(rows: pd.DataFrame, med: pd.DataFrame, lines: list[dict], figures_dir: Path) -> list[Path]:
    """(a) cold load vs unpack per bit-width and format, (b) load+unpack end to end; the ratios beside the paper's."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bits = sorted(med["bits"].unique())
    formats = [f for f in ("int4int8", "kquant", "weightlet") if f in set(med["packing"])]
    fig, (ax_a, ax_b) = plt.subplots(1, 2, figsize=(13, 4.8))
    width, x = 0.8 / max(len(formats), 1), np.arange(len(bits))
    for i, f in enumerate(formats):
        pos = x - 0.4 + width * (i + 0.5)
        for part, metric, shift, style in (("load", "cold_load_seconds", -1, {}),
                                           ("unpack", "unpack_seconds", 1, {"hatch": "///", "alpha": 0.6})):
            st = np.array([_stats(rows, med, b, f, metric) for b in bits]).T
            ax_a.bar(pos + shift * width / 4, st[0], width / 2, color=packbench.COLORS[f],
                     label=f"{packbench.LABELS[f]}: {part}", yerr=[st[0] - st[1], st[2] - st[0]],
                     error_kw=dict(lw=0.7, capsize=2), **style)
    ax_a.set_xticks(x, [f"{b:g} bits" for b in bits])
    ax_a.set_ylabel("ms, measured (this host): median, min..max")
    ax_a.set_title("(a) cold load (2 threads) vs unpack (1 thread)")
    ax_a.legend(fontsize=7, ncol=2)
    for f in [p for p in ("int8", *formats) if p in set(med["packing"])]:
        st = np.array([_stats(rows, med, b, f, "e2e_seconds") for b in bits]).T
        ax_b.errorbar(bits, st[0], yerr=[st[0] - st[1], st[2] - st[0]], marker="o", color=packbench.COLORS[f],
                      label=packbench.LABELS[f], capsize=3, lw=1.2)
    ax_b.set_xticks(bits)
    ax_b.set_xlabel("average bits per weight")
    ax_b.set_ylabel("load + unpack ms, measured (this host)")
    ax_b.set_title("(b) end-to-end, 2 load threads + 1 unpack thread")
    ax_b.legend(fontsize=8)
    note = ["ratio (other / weightlet; > 1: weightlet faster)     paper (Llama3-8B, phone)   ours (this host)"]
    note += [f"{line['metric']:<28s} vs {line['vs'] or '-':<9s}  {line['paper']:>8s}   {line['ours']:>10s} "
             f"({line['ours over']})" for line in lines]
    fig.text(0.01, -0.02, "\n".join(note), family="monospace", fontsize=7.5, va="top")
    fig.suptitle(f"Figure 13 (ours): packing formats - {', '.join(sorted(rows['model'].dropna().unique()))}",
                 fontsize=9)
    fig.tight_layout()
    return output.save_figure(fig, NAME, figures_dir)


def render(rows: pd.DataFrame, paper: pd.DataFrame | None, figures_dir: Path) -> Section:
    if rows.empty:
        return Section(NAME, TITLE, rules.NOT_RUN, "packing benchmark not available (no output of "
                       f"`make {packbench.BENCH_TARGET}` in the store)",
                       f"Not run yet: `make reproduce-{NAME}` (runs the packing benchmark, `make {packbench.BENCH_TARGET}`).\n\n"
                       + paper_table(paper))
    med = packbench.medians(rows)
    models = ", ".join(sorted(rows["model"].dropna().unique())) if "model" in rows else "?"
    load = rows["loadavg"].dropna() if "loadavg" in rows else pd.Series(dtype=float)
    tags = f"model shape {models}" + (f"; load average {load.min():.1f}–{load.max():.1f}" if len(load) else "")
    lines, verdicts = [], []
    caps = packbench.cap_reasons(rows)
    for p in (paper.itertuples() if paper is not None else []):
        mine, over = ours(med, p.metric, p.versus if isinstance(p.versus, str) else "")
        if p.metric == "extra_unpack_s_max":
            v = "info (absolute seconds: model sizes differ)"
        elif p.metric == "simd_instructions_per_weight":
            # fewer is better: at most the paper's count plus the tolerance reproduces it
            v = rules.cap(rules.at_most_verdict(mine, p.value), caps)
            verdicts.append(v)
        else:
            v = rules.ratio_verdict(mine, p.value, caps=caps)
            verdicts.append(v)
        lines.append({"metric": p.metric, "vs": p.versus if isinstance(p.versus, str) else "", "ours": fmt(mine),
                      "ours over": over, "paper": f"{p.value:g}", "verdict": v, "_caps": caps})
    verdict, count = rules.overall(verdicts)
    figures = draw(rows, med, lines, figures_dir)
    med_table = med[med["metric"].isin(["cold_load_seconds", "unpack_seconds", "e2e_seconds",
                                        "instructions_per_weight"])]
    wide = med_table.assign(cell=[f"{fmt(v)} ({q})" if m in ("unpack_seconds", "instructions_per_weight") else fmt(v)
                                  for v, q, m in zip(med_table["value"], med_table["path"], med_table["metric"])])
    wide = wide.pivot_table(index=["bits", "packing"], columns="metric", values="cell", aggfunc="first").reset_index()
    figure = f"![{TITLE}](figures/{figures[0].name})\n\n"
    body = (figure + f"Measured on {tags} (random codes in the paper's Figure 4a bit mix, not a quantized model: the speed of "
            "loading and unpacking depends on bit-widths and shapes, not on code values). Ratios are other format / "
            "weightlet (> 1: weightlet faster). Instructions per weight are counted by callgrind on this host's "
            "SIMD path (the paper's: Neon 128-bit). Medians of single benchmark runs per bit-width, no interval: "
            f"verdicts are capped at *qualitative* ({'; '.join(caps)}).\n\n"
            + md_table(pd.DataFrame(lines)) + "\n**Our medians** (seconds; unpack path in brackets):\n\n"
            + md_table(wide))
    judged = [line for line in lines if not line["verdict"].startswith("info")]
    claims = rules.claims(NAME, judged, lambda line: f"{line['metric']}" + (f" vs {line['vs']}" if line["vs"] else ""))
    return Section(NAME, TITLE, verdict, count, body, figures, claims=claims)


@register_artifact
class Fig13(BenchmarkArtifact):
    NAME, TITLE, EXPERIMENTS = NAME, TITLE, EXPERIMENTS
    measure, load_rows, render = staticmethod(measure), staticmethod(load_rows), staticmethod(render)
