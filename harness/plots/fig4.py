"""Figure 4 (paper section 3.2): layer-by-layer timeline of loading (2 threads) and unpacking (1 thread) for the
padded, mixed, K-quant-like and weightlet formats, from the end-to-end runs of `make bench-unpack` (the median run
of each format). The paper's Llama3-8B totals are written beside ours."""
from __future__ import annotations

import json
from pathlib import Path

import matplotlib.pyplot as plt

from harness.plots.packing import BENCH, COLORS, FIGURES, LABELS, cli, save

PAPER_NOTE = {"int8": "paper: load 3.03 s", "mixed48": "paper: load 2.90 s",
              "kquant": "paper: load 1.60 s, unpack 5.53 s", "weightlet": "paper: - (Fig. 13)"}


def plot(bench: Path = BENCH, out: Path = FIGURES, bits: int = 5) -> list[Path]:
    doc = json.loads((bench / "unpack.json").read_text())
    timelines = doc["timelines"].get(str(bits))
    if timelines is None:
        raise SystemExit(f"no timeline for {bits} bits in {bench / 'unpack.json'}; run make bench-unpack")
    formats = [f for f in ("int8", "mixed48", "kquant", "weightlet") if f in timelines]
    fig, axes = plt.subplots(len(formats), 1, figsize=(12, 1.5 * len(formats) + 0.8), sharex=True)
    for ax, f in zip(axes, formats):
        t = timelines[f]
        n = len(t["load_start"])
        lanes = [f"load {k}" for k in range(t["load_threads"])] + ["unpack"]
        for i in range(n):
            lane = i % t["load_threads"]
            ax.barh(lane, 1e3 * (t["load_end"][i] - t["load_start"][i]), left=1e3 * t["load_start"][i],
                    color=COLORS[f], edgecolor="white", linewidth=0.4)
            ax.barh(len(lanes) - 1, 1e3 * (t["unpack_end"][i] - t["unpack_start"][i]), left=1e3 * t["unpack_start"][i],
                    color=COLORS[f], hatch="///", alpha=0.6, edgecolor="white", linewidth=0.4)
        load = max(t["load_end"]) * 1e3
        unpack = sum(e - s for s, e in zip(t["unpack_start"], t["unpack_end"])) * 1e3
        ax.set_yticks(range(len(lanes)), lanes, fontsize=7)
        ax.invert_yaxis()
        ax.set_title(f"{LABELS[f]}: measured (this host) loads end {load:.0f} ms, unpack busy {unpack:.0f} ms, "
                     f"total {1e3 * t['seconds']:.0f} ms   |   {PAPER_NOTE[f]} (Llama3-8B, phone)", fontsize=8, loc="left")
    axes[-1].set_xlabel("time since start (ms); one box per transformer layer")
    prov = doc["provenance"]
    fig.suptitle(f"Figure 4: load and unpack timeline at {bits} bits - {prov['model']}; "
                 f"load average {prov['loadavg_before']:.1f}", fontsize=9)
    return save(fig, out, "fig4")


if __name__ == "__main__":
    cli(__doc__, plot, bits=5)
