"""Student-t intervals of a mean: the one definition every interval over windows, prompts or log ratios uses."""
from __future__ import annotations

import math


def t975(df: float) -> float:
    """Student's t 0.975 quantile for `df` degrees of freedom (fractional for Welch-Satterthwaite); inf below 1."""
    if not df >= 1:
        return math.inf
    from scipy.stats import t

    return float(t.ppf(0.975, df))


def mean_ci95(values) -> tuple[float, float]:
    """(mean, half-width of a 95% t-interval) over independent samples; half-width nan for fewer than 2."""
    values = [float(v) for v in values]
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, math.nan
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    return mean, t975(n - 1) * sd / math.sqrt(n)
