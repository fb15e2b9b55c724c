"""Perplexities as differences from FP16 on the same windows (Tables 4 and 5): each method's estimate, its 95%
interval, and whether two methods' order is resolved.

The perplexity kind writes one `window_nll` row per window scored (prompt_index = the window) and, for a quantized
model sized against FP16, the FP16 model's NLL on the same windows (`window_nll_ref`). A method's perplexity over the
text is estimated as exp(FP16's mean NLL over every window FP16 scored + the method's mean paired difference): the
text-to-text variation, which dominates the spread of absolute perplexities, cancels in the difference. Two methods
are ordered on the windows both scored; their order is *resolved* when the 95% t-interval of the mean per-window
difference excludes zero.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from harness.eval.sized_perplexity import mean_interval

KEYS = ["model", "dataset", "quantizer", "bits"]


@dataclass(frozen=True)
class Estimate:
    ppl: float
    lo: float
    hi: float
    windows: int

    def text(self) -> str:
        return f"{self.ppl:.4g} [{self.lo:.4g}, {self.hi:.4g}]"


def windows(rows: pd.DataFrame, metric: str = "window_nll") -> dict[tuple, pd.Series]:
    """(model, dataset, quantizer, bits) -> NLL per window (index: the window), from the current rows; FP16's bits
    are None."""
    w = rows[(rows["metric"] == metric) & (rows["status"] == "ok")]
    out = {}
    for key, g in w.groupby(KEYS, dropna=False):
        key = tuple(None if isinstance(k, float) and math.isnan(k) else k for k in key)
        out[key] = g.drop_duplicates("prompt_index", keep="last").set_index("prompt_index")["value"].sort_index()
    return out


def paired_difference(a: pd.Series, b: pd.Series) -> tuple[float, float, int]:
    """(mean, 95% half-width, windows) of a's NLL minus b's on the windows both scored; (nan, inf, n) below two."""
    both = a.index.intersection(b.index)
    if len(both) < 2:
        return math.nan, math.inf, len(both)
    return (*mean_interval(list(a[both] - b[both])), len(both))


def estimate(nll: pd.Series, ref: pd.Series, fp_mean: float) -> Estimate | None:
    """The method's perplexity from its windows `nll`, FP16's on the same windows `ref` and FP16's mean over all its
    windows; None without two shared windows."""
    mean, half, n = paired_difference(nll, ref)
    if n < 2:
        return None
    return Estimate(math.exp(fp_mean + mean), math.exp(fp_mean + mean - half), math.exp(fp_mean + mean + half), n)


def order_resolved(a: pd.Series, b: pd.Series) -> tuple[bool, float, float]:
    """(resolved, mean, half-width) of a's NLL minus b's on the windows both scored."""
    mean, half, _ = paired_difference(a, b)
    return abs(mean) > half, mean, half
