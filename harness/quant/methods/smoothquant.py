"""SmoothQuant (Xiao et al., ICML 2023) adapted to the NPU as section 5.4.1 describes.

SmoothQuant's migration s_k = max|X_k|^alpha / max|W_:,k|^(1-alpha) with its default alpha = 0.5, static per-tensor
INT8 activations and a per-tensor weight grid (its O3 setting, the one an NPU runs), at a uniform b bits. Adapted:
the paper adds its NPU-aware output smoothing (W divided by S_O^beta, beta = 1, restored in the dequant scale) to
meet the per-tensor output quantization constraint. `weight_granularity: channel` gives per-channel weight grids.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from harness.quant.allocate import allocate_uniform
from harness.quant.base import register
from harness.quant.calibrate import LinearStats
from harness.quant.config import QuantizerConfig, _check
from harness.quant.numerics import quantize_per_channel, quantize_per_tensor
from harness.quant.pipeline import SmoothedQuantizer
from harness.quant.smoothing import smoothquant_scales


@dataclass
class SmoothQuantConfig(QuantizerConfig):
    name: str = "smoothquant"
    alpha_grid: list[float] = field(default_factory=lambda: [0.5])
    weight_granularity: str = "tensor"  # tensor (SmoothQuant O3) or channel

    def __post_init__(self):
        super().__post_init__()
        _check(self.weight_granularity in ("tensor", "channel"), "weight_granularity", "tensor or channel",
               self.weight_granularity)


@register
class SmoothQuantQuantizer(SmoothedQuantizer):
    name = "smoothquant"
    Config = SmoothQuantConfig

    def scales(self, weight: torch.Tensor, stats: LinearStats, alpha: float):
        return smoothquant_scales(weight, stats, alpha, self.config.beta)

    def allocate(self, weight: torch.Tensor, budget: float) -> torch.Tensor:
        return allocate_uniform(weight, budget)

    def quantize_weight(self, weight: torch.Tensor, bits: torch.Tensor):
        if self.config.weight_granularity == "channel":
            return quantize_per_channel(weight, bits)
        return quantize_per_tensor(weight, int(bits[0]))
