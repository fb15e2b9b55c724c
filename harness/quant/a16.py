"""Mixed A8/A16 activations (QNN HTP runs INT8 weights with uint16 activations): the linears whose static INT8
activations cost the most get a 16-bit grid over a wider range, within a budget of NPU compute.

Sensitivity is measured, per linear, on its sampled calibration rows X [N, D] (calibrate.LinearStats.rows) with the
linear's quantized weights: the relative squared output error against the FP output X W^T with INT8 activations
(the calibrated range, 127 levels a side) minus the same with A16 (range_gain times the range, 32767 levels a side,
so the step is still range_gain * 127 / 32767 of INT8's, ~16x finer at gain 16). The wider range is for text
unlike the calibration corpus, where a static INT8 range clips. Cost is the linear's share of the model's matmul
MACs (C * D per token); A16 costs HTP about twice A8's time, so the budget is a share of MACs. Greedy by gain per
MAC, largest first, while the chosen share stays within the budget.
"""
from __future__ import annotations

from dataclasses import replace

import torch

from harness.artifact import QuantLinear
from harness.quant.fakequant import FakeQuantLinear
from harness.quant.numerics import act_qmax


def as_a16(q: QuantLinear, range_gain: float) -> QuantLinear:
    """The linear with 16-bit activations over range_gain times its INT8 range."""
    if q.act_scale is None:
        raise ValueError("a weight-only linear has no activations to widen")
    scale = q.act_scale * (act_qmax(8) * range_gain / act_qmax(16))
    return replace(q, act_scale=scale.float(), act_bits=16)


def a16_gain(q: QuantLinear, weight: torch.Tensor, rows: torch.Tensor, range_gain: float) -> float:
    """Relative output error with INT8 activations minus with A16, on calibration rows [N, D] (>= 0 in practice)."""
    reference = rows @ weight.t()  # [N, C]
    energy = max(float((reference ** 2).sum()), 1e-30)

    def error(linear: QuantLinear) -> float:
        with torch.no_grad():
            return float(((FakeQuantLinear(linear)(rows) - reference) ** 2).sum()) / energy
    return error(q) - error(as_a16(q, range_gain))


def choose_a16(gains: dict[str, float], macs: dict[str, int], budget: float) -> set[str]:
    """The linears to give A16: greedy by gain per MAC while their share of all MACs stays <= budget (0..1)."""
    total, spent, chosen = sum(macs.values()), 0, set()
    for name in sorted(gains, key=lambda n: gains[n] / macs[n], reverse=True):
        if gains[name] <= 0:
            break
        if spent + macs[name] <= budget * total:
            chosen.add(name)
            spent += macs[name]
    return chosen
