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


def estimate(nll: pd.Series, ref: pd.Series, fp_mean: float) -> Estimate | None:
    """The method's perplexity from its windows `nll`, FP16's on the same windows `ref` and FP16's mean over all its
    windows; None without two shared windows."""
    common_idx = nll.index.intersection(ref.index)
    if len(common_idx) < 2:
        return None
    mean, half = mean_interval(list(nll[common_idx] - ref[common_idx]))
    return Estimate(math.exp(fp_mean + mean), math.exp(fp_mean + mean - half), math.exp(fp_mean + mean + half),
                    len(common_idx))


def order_resolved(a: pd.Series, b: pd.Series) -> tuple[bool, float, float]:
    """(resolved, mean, half-width) of a's NLL minus b's on the windows both scored."""
    common_idx = a.index.intersection(b.index)
    if len(common_idx) < 2:
        return False, math.nan, math.inf
    mean, half = mean_interval(list(a[common_idx] - b[common_idx]))
    return abs(mean) > half, mean, half
