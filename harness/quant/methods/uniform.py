"""INT-b with NPU-aware smoothing: the INT8 / INT4 baselines of the paper's ablation (section 5.3, Figure 11).

Identical to EdgeFlow (same smoothing and alpha search, per-channel grids, static per-tensor INT8 activations)
except that every output channel gets the same bit-width, budget_bits, which must be an integer.
"""
from __future__ import annotations

import torch

from harness.quant.allocate import allocate_uniform
from harness.quant.base import register
from harness.quant.pipeline import SmoothedQuantizer


@register
class UniformQuantizer(SmoothedQuantizer):
    name = "uniform"

    def allocate(self, weight: torch.Tensor, budget: float) -> torch.Tensor:
        return allocate_uniform(weight, budget)
