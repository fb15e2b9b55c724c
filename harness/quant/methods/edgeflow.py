"""EdgeFlow's NPU-aware adaptive quantization (section 4.1).

Per linear: NPU-aware smoothing W' = diag(S_O^-beta) W diag(S_I^alpha) with beta = 1 and alpha grid-searched on
calibration rows; per-output-channel bit-widths in 1..8 from the greedy allocation of Algorithm 1 over the relative
error of W' (closed form or exact cosine distance, `re_metric`); per-channel signed uniform grids; a static
per-tensor INT8 activation scale.
"""
from __future__ import annotations

import torch

from harness.quant.allocate import allocate_greedy
from harness.quant.base import register
from harness.quant.pipeline import SmoothedQuantizer


@register
class EdgeFlowQuantizer(SmoothedQuantizer):
    name = "edgeflow"

    def allocate_rows(self, re: torch.Tensor, budget: float) -> torch.Tensor:
        return allocate_greedy(re, budget)  # the linears' channels, and the LM head's rows under lm_head=budget
