"""The pipeline every built-in quantizer shares: smooth, allocate bits, quantize, pick alpha on calibration rows.

For each alpha in config.alpha_grid, one candidate layer is built:
    in_scale, out_scale = method.scales(W, stats, alpha)         smoothing (smoothing.py)
    W'    = W / in_scale / out_scale                             [C, D]
    bits  = method.allocate(W', budget)                          [C] in 1..8 (allocate_rows on its RE; allocate.py)
    codes, scale = method.quantize_weight(W', bits)              per-channel or per-tensor grid (numerics.py)
    w_scale = scale * out_scale,  act_scale = max_k(S_I[k] in_scale[k]) / 127
and the candidate whose output on the sampled calibration rows is closest (squared error) to the FP layer's wins:
with alpha_search=float-outputs (the paper's) its output with static 8-bit inputs and float outputs; with
alpha_search=npu as the NPU computes it at the width the linear gets (8 or 16-bit inputs, outputs requantized to
its static grid: a16.npu_output_error), so that an A16 linear gets the smoothing that suits 16-bit inputs (often
none) and an A8 one that which suits 8-bit inputs. With a single alpha the search is skipped. With
weight_rounding=gptq the winning alpha's candidate is then built once more with codes = gptq_codes(W', bits, scale,
H'): the same grids, error-compensating codes (gptq.py), H' the Gram matrix of the smoothed input x * in_scale.
Methods override the hooks (scales, allocate or allocate_rows, quantize_weight, extras); quantize_linear and
quantize_widths are not overridden.
"""
from __future__ import annotations

from dataclasses import replace

import torch

from harness.artifact import QuantLinear
from harness.quant.a16 import at_width, npu_output_error, relative_output_error
from harness.quant.base import LayerResult, Quantizer
from harness.quant.calibrate import LinearStats
from harness.quant.fakequant import OUTLIER_IDX, OUTLIER_WEIGHT, FakeQuantLinear
from harness.quant.gptq import gptq_codes
from harness.quant.metric import relative_error
from harness.quant.numerics import act_scale_for, quantize_per_channel
from harness.quant.smoothing import edgeflow_scales, smooth_weight


class SmoothedQuantizer(Quantizer):
    weight_roundings = ("nearest", "gptq")

    def scales(self, weight: torch.Tensor, stats: LinearStats, alpha: float) -> tuple[torch.Tensor, torch.Tensor]:
        return edgeflow_scales(stats, alpha, self.config.beta)

    def allocate(self, weight: torch.Tensor, budget: float) -> torch.Tensor:
        """Bit-width per output channel [C], averaging at most `budget`: allocate_rows on the channels' relative
        errors (metric.py, config.re_metric), the rule the LM head's rows get too. Uniform methods override this."""
        return self.allocate_rows(relative_error(weight, self.config.re_metric), budget)

    def quantize_weight(self, weight: torch.Tensor, bits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return quantize_per_channel(weight, bits)

    def extras(self, weight: torch.Tensor, stats: LinearStats, in_scale: torch.Tensor) -> dict[str, torch.Tensor]:
        return {}

    def candidate(self, weight: torch.Tensor, stats: LinearStats, alpha: float, budget: float,
                  rounding: str = "nearest") -> LayerResult:
        in_scale, out_scale = self.scales(weight, stats, alpha)
        smoothed = smooth_weight(weight, in_scale, out_scale)
        bits = self.allocate(smoothed, budget)
        codes, scale = self.quantize_weight(smoothed, bits)
        if rounding == "gptq":
            if stats.gram is None:
                raise ValueError("weight_rounding=gptq needs calibration statistics with Gram matrices "
                                 "(collect_stats(..., gram=True); Quantizer.calibrate asks for them)")
            codes = gptq_codes(smoothed, bits, scale, stats.gram * torch.outer(in_scale, in_scale),
                               self.config.gptq_damp)
        linear = QuantLinear(codes=codes, bits=bits.to(torch.uint8), w_scale=(scale * out_scale).float(),
                             in_scale=in_scale.float(), act_scale=act_scale_for(stats.in_max, in_scale))
        return LayerResult(linear, self.extras(weight, stats, in_scale), {"alpha": alpha})

    @property
    def chooses_per_width(self) -> bool:
        return self.config.alpha_search == "npu" and len(self.config.alpha_grid) > 1

    def quantize_linear(self, name: str, weight: torch.Tensor, stats: LinearStats, budget: float) -> LayerResult:
        return self.quantize_at_width(name, weight, stats, budget, 8)

    def quantize_widths(self, name: str, weight: torch.Tensor, stats: LinearStats, budget: float,
                        widths: tuple[int, ...]) -> dict[int, LayerResult]:
        """For each width in `widths`, the best alpha's candidate (by config.alpha_search, for a linear of that many
        bits of input), chosen with nearest rounding; with weight_rounding=gptq that alpha's grids are then rounded
        by GPTQ. The grid's candidates do not depend on the width, so they are built once for all widths, and GPTQ
        runs once per winning alpha (GPTQ per alpha would cost the grid's length again)."""
        grid, rounding = self.config.alpha_grid, self.config.weight_rounding
        if len(grid) == 1:
            return dict.fromkeys(widths, self.candidate(weight, stats, grid[0], budget, rounding))
        reference = stats.rows @ weight.t()  # [N, C]
        # a search that does not depend on the width (chooses_per_width false) measures once for all of them
        searched = widths if self.chooses_per_width else widths[:1]
        errors = {w: self._search_error(stats, reference, w) for w in searched}
        best: dict[int, tuple[float, LayerResult]] = {}
        for alpha in grid:  # candidates one at a time: memory holds the current one and each width's best
            cand = self.candidate(weight, stats, alpha, budget)
            for w, error in errors.items():
                e = error(cand)
                if w not in best or e < best[w][0]:  # the first of equal errors, as min() picks
                    best[w] = (e, cand)
        rounded: dict[float, LayerResult] = {}
        results = {}
        for w, (_, cand) in best.items():
            alpha = cand.info["alpha"]
            if rounding != "nearest" and alpha not in rounded:
                rounded[alpha] = self.candidate(weight, stats, alpha, budget, rounding)
            chosen = rounded.get(alpha, cand)
            results[w] = replace(chosen, info={**chosen.info, "grid_rel_error": errors[w](chosen)})
        return {w: results[w if w in results else searched[0]] for w in widths}

    def _search_error(self, stats: LinearStats, reference: torch.Tensor, act_bits: int):
        """What the alpha search minimises: a candidate -> its relative squared error on the calibration rows."""
        c = self.config
        if c.alpha_search == "npu":
            return lambda cand: npu_output_error(at_width(cand.linear, act_bits, c), stats.rows, reference,
                                                 stats.out_max, c.output_grid, c.output_headroom)
        return lambda cand: relative_output_error(output_of(cand, stats.rows), reference)


def output_of(result: LayerResult, x: torch.Tensor) -> torch.Tensor:
    """What the quantized layer (with any float side path) outputs for x [N, D]."""
    layer = FakeQuantLinear(result.linear, result.extras.get(OUTLIER_IDX), result.extras.get(OUTLIER_WEIGHT))
    return layer(x)
