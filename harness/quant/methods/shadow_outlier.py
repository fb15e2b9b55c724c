"""llm.npu's shadow-outlier execution (Xu et al., ASPLOS 2025), as section 5.2 describes it.

Weights and activations are quantized per tensor (weights at a uniform b bits, activations static INT8) and run as
an INT8 matmul on the NPU; the activation channels with outliers are computed in float on the CPU beside it:
    y = INT8 path(x with outlier channels zeroed) + x[:, outliers] @ W[:, outliers]^T   (float)
Outlier channels are fixed from calibration: input channels whose max |x| exceeds outlier_threshold (6.0, the
LLM.int8() magnitude threshold), at most max_outlier_fraction of the channels, largest first. The INT8 path's
activation scale then covers only the remaining channels. No smoothing. The artifact stores the float path as
<layer>.outlier_idx (int64 [k]) and <layer>.outlier_weight (float16 [C, k]) and in_scale is 0 on those channels;
our runtime has no float side path, so the artifact is marked runtime_compatible = false.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from harness.quant.allocate import allocate_uniform
from harness.quant.base import register
from harness.quant.calibrate import LinearStats
from harness.quant.config import QuantizerConfig, _check, _real
from harness.quant.fakequant import OUTLIER_IDX, OUTLIER_WEIGHT
from harness.quant.numerics import quantize_per_tensor
from harness.quant.pipeline import SmoothedQuantizer


@dataclass
class ShadowOutlierConfig(QuantizerConfig):
    name: str = "shadow_outlier"
    alpha_grid: list[float] = field(default_factory=lambda: [0.0])  # no smoothing: alpha is not used
    beta: float = 0.0
    outlier_threshold: float = 6.0
    max_outlier_fraction: float = 0.01

    def __post_init__(self):
        super().__post_init__()
        _check(_real(self.outlier_threshold) and self.outlier_threshold > 0, "outlier_threshold", "a number > 0",
               self.outlier_threshold)
        _check(_real(self.max_outlier_fraction) and 0 <= self.max_outlier_fraction <= 1, "max_outlier_fraction",
               "a number in [0, 1]", self.max_outlier_fraction)


@register
class ShadowOutlierQuantizer(SmoothedQuantizer):
    name = "shadow_outlier"
    Config = ShadowOutlierConfig
    runtime_compatible = False
    runtime_incompatible_reason = "shadow outliers need a float CPU path beside the INT8 matmul (llm.npu)"

    def outlier_channels(self, stats: LinearStats) -> torch.Tensor:
        """int64 [k], sorted: the calibrated outlier input channels."""
        cap = int(self.config.max_outlier_fraction * stats.in_max.numel())
        over = torch.nonzero(stats.in_max > self.config.outlier_threshold).flatten()
        top = over[torch.argsort(stats.in_max[over], descending=True)[:cap]]
        return torch.sort(top).values

    def scales(self, weight: torch.Tensor, stats: LinearStats, alpha: float):
        in_scale = torch.ones_like(stats.in_max)
        in_scale[self.outlier_channels(stats)] = 0.0  # the INT8 path sees zeros on outlier channels
        return in_scale, torch.ones(weight.shape[0])

    def allocate(self, weight: torch.Tensor, budget: float) -> torch.Tensor:
        return allocate_uniform(weight, budget)

    def quantize_weight(self, weight: torch.Tensor, bits: torch.Tensor):
        return quantize_per_tensor(weight, int(bits[0]))

    def extras(self, weight: torch.Tensor, stats: LinearStats, in_scale: torch.Tensor) -> dict[str, torch.Tensor]:
        idx = torch.nonzero(in_scale == 0).flatten()
        if idx.numel() == 0:
            return {}
        return {OUTLIER_IDX: idx, OUTLIER_WEIGHT: weight[:, idx].half().contiguous()}
