"""Mixed A8/A16 activations (QNN HTP runs INT8 weights with uint16 activations): the linears whose INT8 grids cost
the most get 16-bit activations, within a budget of NPU compute.

On the NPU a linear's width is that of its input and its output alike: an A8 matmul's output is requantized to 8
bits per tensor before the CPU sees it (graph.py; the fake-quant model's float output is what no NPU gives). That
output grid is most of the damage: at 7 bits on the default model, 8-bit outputs on every down_proj alone raise KL
against FP16 from 0.04 to 1.27 (its outputs carry the residual stream's outlier features, so one per-tensor scale
leaves the rest a few levels), measured with the fake-quant model and the same on QNN's HTP simulator.

Sensitivity is measured, per linear, on its sampled calibration rows X [N, D] (calibrate.LinearStats.rows) with the
linear's quantized weights, as the NPU computes it: the relative squared output error against the FP output X W^T
with INT8 input and output grids, minus the same with A16 ones. Input grids are static: INT8's over the calibrated
range, A16's over range_gain times that range (for text unlike the calibration corpus, where a static INT8 range
clips; its step is still range_gain * 127 / 32767 of INT8's); a8_range_gain widens the INT8 grid likewise. Output
grids are the artifact's own (outputs.py: the quantizer's output_grid and output_headroom), at each width. Cost is
the linear's share of the model's matmul MACs (C * D per token); A16 costs HTP about twice A8's time, so the budget
is a share of MACs. Greedy by gain per MAC, largest first, within the budget. With alpha_search=npu (pipeline.py)
each width's error is that of the linear as quantized for that width (its smoothing chosen under that width's
numerics), not of one candidate widened.
"""
from __future__ import annotations

from dataclasses import replace

import torch

from harness.artifact import QuantLinear
from harness.quant.config import QuantizerConfig
from harness.quant.fakequant import FakeQuantLinear
from harness.quant.numerics import act_qmax
from harness.quant.outputs import with_output_grid


def as_a16(q: QuantLinear, range_gain: float) -> QuantLinear:
    """The linear with 16-bit activations over range_gain times its INT8 range."""
    if q.act_scale is None:
        raise ValueError("a weight-only linear has no activations to widen")
    scale = q.act_scale * (act_qmax(8) * range_gain / act_qmax(16))
    return replace(q, act_scale=scale.float(), act_bits=16)


def at_width(q: QuantLinear, act_bits: int, config: QuantizerConfig) -> QuantLinear:
    """The linear as quantized (its 8-bit input grid over the calibrated range) given its grid at `act_bits`: 16 bits
    over config.a16_range_gain times that range (as_a16), 8 bits over config.a8_range_gain times it."""
    if act_bits == 16:
        return as_a16(q, config.a16_range_gain)
    if q.act_scale is None or config.a8_range_gain == 1.0:
        return q
    return replace(q, act_scale=(q.act_scale * config.a8_range_gain).float())


def relative_output_error(y: torch.Tensor, reference: torch.Tensor) -> float:
    """||y - reference||^2 / ||reference||^2 over a layer's outputs [N, C] (the error every quantizer search here
    minimises)."""
    return float(((y - reference) ** 2).sum()) / max(float((reference ** 2).sum()), 1e-30)


def npu_output_error(q: QuantLinear, rows: torch.Tensor, reference: torch.Tensor, peaks: torch.Tensor, grid: str,
                     headroom: float) -> float:
    """Relative squared output error of the linear as the NPU computes it (its static input grid at its width, the
    integer matmul, the output requantized to the grid `grid` over the calibrated peaks [C]: outputs.py) on
    calibration rows [N, D], against the FP output reference [N, C]."""
    with torch.no_grad():
        return relative_output_error(FakeQuantLinear(with_output_grid(q, peaks, grid, headroom))(rows), reference)


def a16_gain(q: QuantLinear, weight: torch.Tensor, rows: torch.Tensor, peaks: torch.Tensor, config: QuantizerConfig,
             q16: QuantLinear | None = None) -> float:
    """Relative output error with INT8 input and output grids minus with A16 ones (at_width), on calibration rows
    [N, D]; the output grids config's over the calibrated peaks [C] (outputs.with_output_grid). q16: the linear as
    quantized for A16 when the quantizer chooses per width (pipeline.py alpha_search=npu), else q."""
    reference = rows @ weight.t()  # [N, C]
    grid, headroom = config.output_grid, config.output_headroom
    return (npu_output_error(at_width(q, 8, config), rows, reference, peaks, grid, headroom)
            - npu_output_error(at_width(q if q16 is None else q16, 16, config), rows, reference, peaks, grid, headroom))


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
