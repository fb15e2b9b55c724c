"""The pipeline every built-in quantizer shares: smooth, allocate bits, quantize, pick alpha on calibration rows.

For each alpha in config.alpha_grid, one candidate layer is built:
    in_scale, out_scale = method.scales(W, stats, alpha)         smoothing (smoothing.py)
    W'    = W / in_scale / out_scale                             [C, D]
    bits  = method.allocate(W', budget)                          [C] in 1..8 (allocate.py)
    codes, scale = method.quantize_weight(W', bits)              per-channel or per-tensor grid (numerics.py)
    w_scale = scale * out_scale,  act_scale = max_k(S_I[k] in_scale[k]) / 127
and the candidate whose output on the sampled calibration rows is closest (squared error) to the FP layer's wins.
With a single alpha the search is skipped. Methods override the four hooks; quantize_linear is not overridden.
"""
from __future__ import annotations

from abc import abstractmethod

import torch

from harness.artifact import QuantLinear
from harness.quant.base import LayerResult, Quantizer
from harness.quant.calibrate import LinearStats
from harness.quant.fakequant import OUTLIER_IDX, OUTLIER_WEIGHT, FakeQuantLinear
from harness.quant.numerics import act_scale_for, quantize_per_channel
from harness.quant.smoothing import edgeflow_scales, smooth_weight


class SmoothedQuantizer(Quantizer):
    def scales(self, weight: torch.Tensor, stats: LinearStats, alpha: float) -> tuple[torch.Tensor, torch.Tensor]:
        return edgeflow_scales(stats, alpha, self.config.beta)

    @abstractmethod
    def allocate(self, weight: torch.Tensor, budget: float) -> torch.Tensor:
        """Bit-width per output channel, uint8 [C], averaging at most `budget`."""

    def quantize_weight(self, weight: torch.Tensor, bits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return quantize_per_channel(weight, bits)

    def extras(self, weight: torch.Tensor, stats: LinearStats, in_scale: torch.Tensor) -> dict[str, torch.Tensor]:
        return {}

    def candidate(self, weight: torch.Tensor, stats: LinearStats, alpha: float, budget: float) -> LayerResult:
        in_scale, out_scale = self.scales(weight, stats, alpha)
        smoothed = smooth_weight(weight, in_scale, out_scale)
        bits = self.allocate(smoothed, budget)
        codes, scale = self.quantize_weight(smoothed, bits)
        linear = QuantLinear(codes=codes, bits=bits.to(torch.uint8), w_scale=(scale * out_scale).float(),
                             in_scale=in_scale.float(), act_scale=act_scale_for(stats.in_max, in_scale))
        return LayerResult(linear, self.extras(weight, stats, in_scale), {"alpha": alpha})

    def quantize_linear(self, name: str, weight: torch.Tensor, stats: LinearStats, budget: float) -> LayerResult:
        grid = self.config.alpha_grid
        if len(grid) == 1:
            return self.candidate(weight, stats, grid[0], budget)
        reference = stats.rows @ weight.t()  # [N, C]
        best, best_err = None, float("inf")
        for alpha in grid:
            cand = self.candidate(weight, stats, alpha, budget)
            err = float(((output_of(cand, stats.rows) - reference) ** 2).sum())
            if err < best_err:
                best, best_err = cand, err
        best.info["grid_rel_error"] = best_err / max(float((reference ** 2).sum()), 1e-30)
        return best


def output_of(result: LayerResult, x: torch.Tensor) -> torch.Tensor:
    """What the quantized layer (with any float side path) outputs for x [N, D]."""
    layer = FakeQuantLinear(result.linear, result.extras.get(OUTLIER_IDX), result.extras.get(OUTLIER_WEIGHT))
    return layer(x)
