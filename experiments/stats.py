"""The intervals behind the verdicts: Wilson intervals of proportions, MOVER for their combinations (paired where
measured on the same items), and TTFT ratios over the prompts two systems both timed (bootstrap, or a t-interval of
per-prompt log ratios when prompts are few)."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from experiments.selection import prompt_ids


BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_MIN_PROMPTS = 8    # fewer common prompts per dataset: a t-interval of per-prompt log ratios instead
BOOTSTRAP_SEED = 0


def wilson(k: float, n: int) -> tuple[float, float]:
    """The 95% Wilson score interval of a proportion k/n (k rounded to whole items: an accuracy times its items)."""
    from scipy.stats import binomtest

    if n is None or n <= 0:
        return math.nan, math.nan
    ci = binomtest(round(k), int(n)).proportion_ci(0.95, method="wilson")
    return float(ci.low), float(ci.high)


def combination_interval(terms: list[tuple[float, float, int | None]],
                         correlations: dict[tuple[int, int], float] | None = None) -> tuple[float, float, float]:
    """(value, lo, hi) of sum(coef * p) over terms (coef, p, n), each p a proportion over n items: the Wilson
    interval of each p combined by MOVER (Zou & Donner 2008; for one difference it is Newcombe's method 10).
    `correlations` {(i, j): phi} gives the correlation of the proportions of terms i and j where they were measured on
    the same items (paired_phi); other pairs are treated as independent, which is conservative for proportions on the
    same items (positively correlated). lo/hi are NaN when any n is unknown."""
    value = float(sum(c * p for c, p, _ in terms))
    if not terms or any(n is None or not n > 0 for _, _, n in terms):
        return value, math.nan, math.nan
    below, above = [], []  # per term: how far c * p lies above its lower limit, below its upper one
    for c, p, n in terms:
        lo, hi = wilson(p * n, int(n))
        a, b = sorted((c * lo, c * hi))
        below.append(c * p - a)
        above.append(b - c * p)
    down, up = sum(d * d for d in below), sum(u * u for u in above)
    for (i, j), phi in (correlations or {}).items():
        r = phi * math.copysign(1.0, terms[i][0] * terms[j][0])  # the correlation of c_i p_i with c_j p_j
        down += 2 * r * below[i] * below[j]
        up += 2 * r * above[i] * above[j]
    return value, value - math.sqrt(max(down, 0.0)), value + math.sqrt(max(up, 0.0))


def paired_phi(x: list[float], y: list[float]) -> float:
    """The phi coefficient of two 0/1 outcomes on the same items (Newcombe 1998, method 10); 0 where a margin is
    empty (every item right, or every item wrong, for one of them)."""
    if len(x) != len(y):
        raise ValueError(f"paired outcomes need the same items: {len(x)} and {len(y)}")
    a = sum(1 for u, v in zip(x, y) if u and v)
    b = sum(1 for u, v in zip(x, y) if u and not v)
    c = sum(1 for u, v in zip(x, y) if v and not u)
    d = len(x) - a - b - c
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    return (a * d - b * c) / math.sqrt(margins) if margins else 0.0


def _resampled_medians(groups: dict, prompts: list, idx: np.ndarray, rng) -> np.ndarray:
    """Median per resample: idx [B, P] draws prompts; each drawn prompt contributes as many repetitions, drawn with
    replacement, as it has. groups: prompt -> 1-D array of its repetitions' values (a prompt may be absent)."""
    reps = max((len(v) for v in groups.values()), default=0)
    if reps == 0:
        return np.full(idx.shape[0], np.nan)
    values = np.full((len(prompts), reps), np.nan)  # [P, R], padded with NaN
    counts = np.zeros(len(prompts), dtype=int)
    for i, p in enumerate(prompts):
        v = np.asarray(groups.get(p, []), dtype=float)
        values[i, :len(v)], counts[i] = v, len(v)
    cnt = counts[idx]                                                  # [B, P] repetitions of each drawn prompt
    rep = np.floor(rng.random((*idx.shape, reps)) * cnt[..., None]).astype(int)  # [B, P, R], < cnt
    sample = values[idx[..., None], rep]
    sample = np.where(np.arange(reps) < cnt[..., None], sample, np.nan).reshape(idx.shape[0], -1)
    out = np.full(idx.shape[0], np.nan)
    some = ~np.isnan(sample).all(axis=1)
    out[some] = np.nanmedian(sample[some], axis=1)
    return out


def bootstrap_ratio(num: pd.DataFrame, den: pd.DataFrame, datasets=None, resamples: int = BOOTSTRAP_RESAMPLES,
                    seed: int = BOOTSTRAP_SEED) -> dict:
    """TTFT ratio num / den (e.g. baseline / EdgeFlow) over rows with dataset, value and the prompt (prompt_ids), on
    the prompts both systems timed (a prompt one of them lacks would unpair the two medians): per dataset both have,
    median(num) / median(den); the ratio is their geometric mean over datasets. Its 95% interval: with at least
    BOOTSTRAP_MIN_PROMPTS common prompts in every dataset, the 2.5-97.5 percentile of a seeded bootstrap that, per
    dataset, draws prompts with replacement (the same draw for both systems) and each drawn prompt's repetitions with
    replacement (independently per system); with fewer (a percentile bootstrap over 3 prompts has 10 distinct
    resamples), the t-interval of the mean per-prompt log ratio (each prompt's median over its repetitions), per
    dataset, combined over datasets with Welch-Satterthwaite's degrees of freedom; the ratio is then that mean's.
    Returns ratio, lo, hi, datasets (count), prompts (the fewest common prompts of one dataset) and method."""
    empty = {"ratio": math.nan, "lo": math.nan, "hi": math.nan, "datasets": 0, "prompts": 0, "method": "none"}
    pairs = {}  # dataset -> ({prompt: num's values}, {prompt: den's values}) over the common prompts
    for d in sorted(set(num["dataset"].dropna()) & set(den["dataset"].dropna())):
        if datasets is not None and d not in set(datasets):
            continue
        a, b = num[num["dataset"] == d], den[den["dataset"] == d]
        ga = {p: g["value"].to_numpy(float) for p, g in a.groupby(prompt_ids(a))}
        gb = {p: g["value"].to_numpy(float) for p, g in b.groupby(prompt_ids(b))}
        both = sorted(set(ga) & set(gb))
        if both:
            pairs[d] = ({p: ga[p] for p in both}, {p: gb[p] for p in both})
    if not pairs:
        return empty
    fewest = min(len(ga) for ga, _ in pairs.values())
    if fewest >= BOOTSTRAP_MIN_PROMPTS:
        return {**_bootstrap(pairs, resamples, seed), "datasets": len(pairs), "prompts": fewest,
                "method": f"bootstrap over prompts ({resamples} resamples)"}
    return {**_t_interval_of_log_ratios(pairs), "datasets": len(pairs), "prompts": fewest,
            "method": "t-interval of per-prompt log ratios"}


def _bootstrap(pairs: dict, resamples: int, seed: int) -> dict:
    """ratio, lo, hi of bootstrap_ratio's bootstrap over `pairs` (dataset -> (num's, den's values per prompt))."""
    rng = np.random.default_rng(seed)
    point, boot = [], np.empty((resamples, len(pairs)))
    for j, (ga, gb) in enumerate(pairs.values()):
        prompts = list(ga)
        point.append(math.log(np.median(np.concatenate(list(ga.values())))
                              / np.median(np.concatenate(list(gb.values())))))
        idx = rng.integers(0, len(prompts), size=(resamples, len(prompts)))
        boot[:, j] = np.log(_resampled_medians(ga, prompts, idx, rng)) - np.log(_resampled_medians(gb, prompts, idx, rng))
    geo = boot.mean(axis=1)
    geo = geo[np.isfinite(geo)]
    ratio = math.exp(sum(point) / len(point))
    if not len(geo):
        return {"ratio": ratio, "lo": math.nan, "hi": math.nan}
    lo, hi = np.exp(np.percentile(geo, [2.5, 97.5]))
    # medians of few values are discrete: a percentile interval can miss the estimate itself; widen it to hold it
    return {"ratio": ratio, "lo": float(min(lo, ratio)), "hi": float(max(hi, ratio))}


def _t_interval_of_log_ratios(pairs: dict) -> dict:
    """ratio, lo, hi from the per-prompt log ratios log(median num / median den) of `pairs`: the mean over datasets
    of each dataset's mean, with the t-interval whose variance sums the datasets' (s_d^2 / n_d) / D^2 and whose
    degrees of freedom are Welch-Satterthwaite's; no interval when a dataset has fewer than two prompts."""
    from harness.eval.intervals import t975

    means, variances, dfs = [], [], []
    for ga, gb in pairs.values():
        r = np.array([math.log(np.median(ga[p]) / np.median(gb[p])) for p in ga])
        means.append(r.mean())
        variances.append(r.var(ddof=1) / len(r) if len(r) > 1 else math.nan)
        dfs.append(len(r) - 1)
    d = len(means)
    est = float(np.mean(means))
    v = np.array(variances)
    if not np.isfinite(v).all():
        return {"ratio": math.exp(est), "lo": math.nan, "hi": math.nan}
    if v.sum() == 0:
        return {"ratio": math.exp(est), "lo": math.exp(est), "hi": math.exp(est)}
    df = v.sum() ** 2 / sum(x * x / k for x, k in zip(v, dfs))
    half = t975(df) * math.sqrt(v.sum()) / d
    return {"ratio": math.exp(est), "lo": math.exp(est - half), "hi": math.exp(est + half)}


def finite(x) -> bool:
    return x is not None and isinstance(x, (int, float, np.floating)) and math.isfinite(x)
