"""Relative error RE(W_i, B) of an output channel quantized to B bits (section 4.1, Appendix A).

Both forms return a table re [C, 8]: re[i, B-1] = RE(W_i, B) for B = 1..8.

- exact: the cosine distance 1 - <W_i, Wq_i> / (|W_i| |Wq_i|) between the channel and its dequantised B-bit version.
- closed: Appendix A's approximation RE ~= E[E^2] / (2 E[W_i^2]) with the rounding error E ~ U(-S/2, S/2), so
  E[E^2] = S^2 / 12, where S = max|W_i| / 2^(B-1) is the channel's step at B bits (numerics.py). Hence
  RE = max|W_i|^2 / (6 * 4^B * E[W_i^2]): one statistic per channel, and the gains RE(B) - RE(B+1) shrink by 4x per
  bit, so they are always strictly decreasing (convex RE), which is what makes the greedy allocation optimal.
  The exact form has no such guarantee (see allocate.py and docs/quantizers.md).
"""
from __future__ import annotations

import torch

from harness.quant.numerics import quantize_per_channel

MAX_BITS = 8
BIT_WIDTHS = torch.arange(1, MAX_BITS + 1)


def relative_error_closed(w: torch.Tensor) -> torch.Tensor:
    """float64 [C, 8] closed-form RE of each row of w [C, D]; 0 for all-zero rows."""
    peak2 = w.abs().amax(dim=1).double() ** 2  # [C]; reductions in float32, the [C, 8] table in float64
    mean2 = w.pow(2).mean(dim=1).double()  # [C]
    ratio = torch.where(mean2 > 0, peak2 / mean2.clamp_min(1e-300), torch.zeros_like(mean2))
    return ratio[:, None] / (6.0 * 4.0 ** BIT_WIDTHS.double())[None, :]


def relative_error_exact(w: torch.Tensor) -> torch.Tensor:
    """float64 [C, 8] cosine distance between each row of w [C, D] and its dequantised B-bit version."""
    w = w.float()
    c = w.shape[0]
    norm = w.double().norm(dim=1)
    out = torch.zeros(c, MAX_BITS, dtype=torch.float64)
    for b in range(1, MAX_BITS + 1):
        codes, scale = quantize_per_channel(w, torch.full((c,), b))
        wq = codes.double() * scale.double()[:, None]
        denom = norm * wq.norm(dim=1)
        cos = torch.where(denom > 0, (w.double() * wq).sum(dim=1) / denom.clamp_min(1e-300), torch.ones_like(denom))
        out[:, b - 1] = (1.0 - cos).clamp_min(0.0)
    return out


RE_METRICS = {"closed": relative_error_closed, "exact": relative_error_exact}


def relative_error(w: torch.Tensor, metric: str) -> torch.Tensor:
    try:
        return RE_METRICS[metric](w)
    except KeyError:
        raise ValueError(f"re_metric must be one of {sorted(RE_METRICS)}, got {metric!r}") from None
