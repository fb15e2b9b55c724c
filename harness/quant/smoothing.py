"""Smoothing: move activation outliers into the weights before quantizing (section 4.1, and SmoothQuant's variant).

Layouts follow Hugging Face: weight W [C, D], y = x W^T. The paper writes W [D, C] and W' = diag(S_I^a) W diag(S_O^-b);
here that is
    W'[c, k] = W[c, k] * S_I[k]^alpha / S_O[c]^beta,   in_scale[k] = S_I[k]^-alpha,   out_scale[c] = S_O[c]^beta
so that y = (x * in_scale) W'^T * out_scale. The runtime folds in_scale into the activation quantization
multiplier and out_scale into w_scale (docs/quantized-artifact.md).

Note: with per-output-channel weight scales, dividing a row by S_O[c]^beta changes neither its codes nor its
relative error (both are invariant to a row's scale); the output smoothing matters only for per-tensor weight grids
(SmoothQuant's and llm.npu's). We keep it everywhere, as the paper does, and it costs nothing.
"""
from __future__ import annotations

import torch

from harness.quant.calibrate import LinearStats

EPS = 1e-5  # floor for dead channels' statistics, so that powers and divisions stay finite


def edgeflow_scales(stats: LinearStats, alpha: float, beta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(in_scale [D], out_scale [C]) of NPU-aware smoothing: S_I^-alpha and S_O^beta."""
    return stats.in_max.clamp_min(EPS) ** -alpha, stats.out_max.clamp_min(EPS) ** beta


def smoothquant_scales(weight: torch.Tensor, stats: LinearStats, alpha: float, beta: float):
    """(in_scale, out_scale) of SmoothQuant's migration s_k = max|X_k|^alpha / max|W_:,k|^(1-alpha) (in_scale = 1/s),
    with the NPU-aware output smoothing S_O^beta added, as section 5.4.1 adapts it."""
    w_max = weight.abs().amax(dim=0).clamp_min(EPS)  # [D]
    s = stats.in_max.clamp_min(EPS) ** alpha / w_max ** (1 - alpha)
    return 1.0 / s, stats.out_max.clamp_min(EPS) ** beta


def smooth_weight(weight: torch.Tensor, in_scale: torch.Tensor, out_scale: torch.Tensor) -> torch.Tensor:
    """W' [C, D] = W / in_scale[k] / out_scale[c]; an input channel with in_scale 0 is left out of the quantized
    path (its column is 0: shadow outliers compute it in float instead)."""
    kept = in_scale > 0
    if bool(kept.all()):
        return weight * torch.outer(1.0 / out_scale, 1.0 / in_scale)
    cols = torch.where(kept, in_scale, torch.ones_like(in_scale))
    return torch.where(kept[None, :], weight / cols[None, :], torch.zeros_like(weight)) / out_scale[:, None]
