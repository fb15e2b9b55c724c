"""Figure 13 (paper section 5.4.2): (a) cold load vs unpack time per packing format, (b) end-to-end load+unpack
(2 load threads, 1 unpack thread) by average bit-width. Reads what `make bench-unpack` measured; the paper gives only
ratios for this figure, so those are printed beside ours instead of being drawn as bars."""
from __future__ import annotations

import json
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from harness.plots.packing import BENCH, COLORS, FIGURES, LABELS, cli, save


def medians(csv: Path, stat: str = "median") -> pd.Series:
    """One value per (bits, packing, path, metric): the median of the repetitions, or their "min" / "max"."""
    df = pd.read_csv(csv)
    return df.groupby(["bits", "packing", "path", "metric"])["value"].agg(stat)


def spread(lo: pd.Series, med: pd.Series, hi: pd.Series, bits, packing, metric, path=None) -> np.ndarray:
    """[[below], [above]] the median, in ms, for matplotlib's yerr (min..max of the repetitions)."""
    m = np.array([pick(med, b, packing, metric, path) for b in bits])
    return 1e3 * np.array([m - [pick(lo, b, packing, metric, path) for b in bits],
                           np.array([pick(hi, b, packing, metric, path) for b in bits]) - m])


def pick(med: pd.Series, bits: int, packing: str, metric: str, path: str | None = None) -> float:
    sel = med.xs((bits, packing), level=("bits", "packing"))
    sel = sel[sel.index.get_level_values("metric") == metric]
    if path is not None:
        sel = sel[sel.index.get_level_values("path") == path]
    return float(sel.iloc[0]) if len(sel) else float("nan")


def unpack_path(packing: str) -> str:
    return "avx2" if packing == "weightlet" else "native"


def plot(bench: Path = BENCH, out: Path = FIGURES) -> list[Path]:
    med = medians(bench / "unpack.csv")
    lo, hi = medians(bench / "unpack.csv", "min"), medians(bench / "unpack.csv", "max")
    doc = json.loads((bench / "unpack.json").read_text())
    bits = sorted(med.index.get_level_values("bits").unique())
    formats = [f for f in ("mixed48", "kquant", "weightlet") if f in med.index.get_level_values("packing")]
    fig, (ax_a, ax_b) = plt.subplots(1, 2, figsize=(13, 4.8))

    # (a) load and unpack side by side, per bit-width and format
    width = 0.8 / len(formats)
    x = np.arange(len(bits))
    for i, f in enumerate(formats):
        load = [1e3 * pick(med, b, f, "cold_load_seconds") for b in bits]
        unpack = [1e3 * pick(med, b, f, "unpack_seconds", unpack_path(f)) for b in bits]
        pos = x - 0.4 + width * (i + 0.5)
        ax_a.bar(pos - width / 4, load, width / 2, color=COLORS[f], label=f"{LABELS[f]}: load",
                 yerr=spread(lo, med, hi, bits, f, "cold_load_seconds"), error_kw=dict(lw=0.7, capsize=2))
        ax_a.bar(pos + width / 4, unpack, width / 2, color=COLORS[f], hatch="///", alpha=0.6,
                 label=f"{LABELS[f]}: unpack", yerr=spread(lo, med, hi, bits, f, "unpack_seconds", unpack_path(f)),
                 error_kw=dict(lw=0.7, capsize=2))
    ax_a.set_xticks(x, [f"{b} bits" for b in bits])
    ax_a.set_ylabel("ms, measured (this host): median, min..max")
    ax_a.set_title("(a) cold load (2 threads) vs unpack (1 thread)")
    ax_a.legend(fontsize=7, ncol=2)

    # (b) end-to-end by bit-width
    for f in ["int8", *formats]:
        if f not in med.index.get_level_values("packing"):
            continue
        e2e = [1e3 * pick(med, b, f, "e2e_seconds") for b in bits]
        ax_b.errorbar(bits, e2e, yerr=spread(lo, med, hi, bits, f, "e2e_seconds"), marker="o", color=COLORS[f],
                      label=LABELS[f], capsize=3, lw=1.2)
    ax_b.set_xticks(bits)
    ax_b.set_xlabel("average bits per weight")
    ax_b.set_ylabel("load + unpack ms, measured (this host)")
    ax_b.set_title("(b) end-to-end, 2 load threads + 1 unpack thread")
    ax_b.legend(fontsize=8)

    s, paper = doc["summary"]["per_bits"], doc["paper"]
    # (absent from files written before the Neon count existed, or where the aarch64 tools are missing)
    neon = doc["summary"].get("neon_static_loop_instructions_per_weight_mean_4to7", float("nan"))
    mean = lambda key: np.mean([v[key] for v in s.values()])  # noqa: E731
    note = (f"ratios (mean over {bits[0]}-{bits[-1]} bits)   paper (Llama3-8B, phone)   measured (this host)\n"
            f"load, weightlet vs mixed:     {paper['load_speedup_vs_mixed48']:.2f}x      {mean('load_speedup_vs_mixed48'):.2f}x\n"
            f"unpack, weightlet vs K-quant: {paper['unpack_speedup_vs_kquant']:.2f}x      "
            f"{mean('unpack_speedup_avx2_vs_kquant'):.2f}x\n"
            f"end-to-end vs K-quant:        {paper['e2e_speedup_vs_kquant']:.2f}x      {mean('e2e_speedup_vs_kquant'):.2f}x\n"
            f"end-to-end vs mixed:          {paper['e2e_speedup_vs_mixed48']:.2f}x      {mean('e2e_speedup_vs_mixed48'):.2f}x\n"
            f"instructions/weight:          {paper['simd_instructions_per_weight']:.2f} (Neon SIMD)   "
            f"{doc['summary']['avx2_instructions_per_weight_mean_4to7']:.2f} (AVX2, callgrind, all instr.), "
            f"{neon:.2f} (Neon loop, static)")
    prov = doc["provenance"]
    fig.text(0.01, -0.02, note, family="monospace", fontsize=8, va="top")
    fig.suptitle(f"Figure 13: packing formats - {prov['model']}; load average {prov['loadavg_before']:.1f} "
                 f"-> {prov['loadavg_after']:.1f}; commit {prov['git_commit']}", fontsize=9)
    return save(fig, out, "fig13")


if __name__ == "__main__":
    cli(__doc__, plot)
