"""CMPQ (Chen et al., 2024, arXiv:2410.13056) adapted to the NPU as section 5.4.1 describes.

CMPQ gives whole weight channels one of two adjacent precisions. Adapted: the channels are output channels (the NPU
only allows per-output-channel weight scales) and they are ranked by EdgeFlow's relative error instead of CMPQ's
activation-based criterion; the channels with the largest RE at floor(budget) bits get floor(budget) + 1 bits,
as many as the budget allows. CMPQ's non-uniform grids and its outlier extraction cannot run in an INT8 NPU matmul
and are dropped; smoothing and activations are as in EdgeFlow. The difference from EdgeFlow is therefore exactly
the allocation: two adjacent levels by ranking, against Algorithm 1's 1..8-bit greedy optimum.
"""
from __future__ import annotations

import torch

from harness.quant.allocate import allocate_two_level
from harness.quant.base import register
from harness.quant.pipeline import SmoothedQuantizer


@register
class CMPQQuantizer(SmoothedQuantizer):
    name = "cmpq"

    def allocate_rows(self, re: torch.Tensor, budget: float) -> torch.Tensor:
        return allocate_two_level(re, budget)
