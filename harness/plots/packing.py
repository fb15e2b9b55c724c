"""Shared by the packing-format figures (fig13, fig4): where `make bench-unpack` writes, names, colours, saving."""
from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

BENCH = Path("results/runs/bench")
FIGURES = Path("results/figures")
LABELS = {"int8": "INT8 (padded)", "mixed48": "INT4/INT8 mixed", "kquant": "K-quant-like", "weightlet": "EdgeFlow weightlet"}
COLORS = {"int8": "#999999", "mixed48": "#4c72b0", "kquant": "#dd8452", "weightlet": "#55a868"}


def save(fig, out: Path, name: str) -> list[Path]:
    """PNG and PDF of `fig` under out/."""
    fig.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{name}.png", out / f"{name}.pdf"]
    for p in paths:
        fig.savefig(p, bbox_inches="tight", dpi=130)
    plt.close(fig)
    return paths


def cli(description: str, plot, argv=None, **extra) -> None:
    """--bench and --out, plus `extra` int options (name=default); prints the written paths."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--bench", type=Path, default=BENCH)
    ap.add_argument("--out", type=Path, default=FIGURES)
    for name, default in extra.items():
        ap.add_argument(f"--{name}", type=int, default=default)
    a = vars(ap.parse_args(argv))
    for p in plot(**a):
        print(p)
