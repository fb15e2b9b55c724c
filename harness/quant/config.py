"""Quantizer configuration: the Hydra group `quantizer` (conf/quantizer/<name>.yaml) validated by a dataclass.

Every quantizer accepts the keys of QuantizerConfig; a quantizer with options of its own declares a subclass as its
`Config` (base.py). An unknown key, or a value out of range, is an error naming the key before any work starts.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from harness.artifact import LINEAR_SUFFIXES
from harness.config import ConfigError  # the app's error type: the CLI prints it without a traceback
from harness.quant.metric import MAX_BITS, RE_METRICS
from harness.quant.numerics import OUTPUT_GRIDS

DEFAULT_LAYERS = tuple(f"*.{s}" for s in LINEAR_SUFFIXES)  # every q/k/v/o/gate/up/down projection
DEFAULT_ALPHA_GRID = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
WEIGHT_ROUNDINGS = ("nearest", "gptq")  # gptq: error-compensating rounding on the same grids (gptq.py)
# What the alpha grid search measures on the calibration rows (pipeline.py). float-outputs: the paper's, the output
# error with static 8-bit inputs and float outputs, whatever width the linear gets; npu: the linear as the NPU
# computes it, its input grid at the width it gets (8 or 16) and its static output grid (a16.npu_output_error).
ALPHA_SEARCHES = ("float-outputs", "npu")
# Where the LM head's bits come from. table: stored like the embedding (embedding_bits), outside the bit budget;
# budget: weight-only rows averaging budget_for("lm_head") (budget_bits, or a layer_budgets entry matching "lm_head"),
# widths chosen by the quantizer's own allocation, a tied table given its own copy (docs/quantizers.md "The LM head":
# why table is the default).
LM_HEAD_STORAGE = ("table", "budget")


@dataclass
class QuantizerConfig:
    name: str = "edgeflow"
    budget_bits: float = 5.0  # average bits per weight of each quantized linear, in [1, 8]; fractions allowed
    layers: list[str] = field(default_factory=lambda: list(DEFAULT_LAYERS))  # fnmatch globs on module names
    layer_budgets: dict[str, float] = field(default_factory=dict)  # glob -> budget_bits override (first match wins)
    alpha_grid: list[float] = field(default_factory=lambda: list(DEFAULT_ALPHA_GRID))  # smoothing strengths tried
    beta: float = 1.0  # output smoothing exponent (the paper fixes 1)
    embedding_bits: int = 8  # embeddings (and a "table" LM head): 8 = per-row INT8 weight-only, 16 = kept in FP16
    lm_head: str = "table"  # table or budget (LM_HEAD_STORAGE above; docs/quantizers.md "The LM head")
    re_metric: str = "closed"  # closed: Appendix A's closed form; exact: cosine distance
    grid_tokens: int = 128  # calibration rows per linear on which the alpha grid search measures output error
    a16_budget: float = 0.0  # share of matmul MACs whose activations may be 16-bit (A16, HTP only; a16.py)
    a16_range_gain: float = 16.0  # an A16 linear's grid covers this many times its calibrated INT8 range
    a8_range_gain: float = 1.0  # an A8 linear's grid covers this many times its calibrated range (1: the paper's)
    weight_rounding: str = "nearest"  # nearest (the paper's) or gptq (codes that compensate each other's error)
    gptq_damp: float = 1.0  # GPTQ's damping of the Gram matrix, as a multiple of its mean diagonal (gptq.py)
    output_grid: str = "channel"  # the NPU's static output grid per linear (outputs.py): channel, tensor, or none
    output_headroom: float = 4.0  # output grids span this many times the calibrated peak (text unlike the corpus)
    alpha_search: str = "float-outputs"  # float-outputs (the paper's) or npu (ALPHA_SEARCHES above; beyond the paper)

    def __post_init__(self):
        _check(isinstance(self.name, str) and self.name, "name", "a non-empty string", self.name)
        self.budget_bits = _budget("budget_bits", self.budget_bits)
        _check(_str_list(self.layers) and len(self.layers) > 0, "layers", "a non-empty list of glob patterns",
               self.layers)
        _check(isinstance(self.layer_budgets, dict) and _str_list(list(self.layer_budgets)), "layer_budgets",
               "a mapping glob -> budget", self.layer_budgets)
        self.layer_budgets = {k: _budget(f"layer_budgets[{k!r}]", v) for k, v in self.layer_budgets.items()}
        grid = list(self.alpha_grid) if isinstance(self.alpha_grid, (list, tuple)) else None
        _check(grid and all(_real(a) and 0 <= a <= 1 for a in grid), "alpha_grid",
               "a non-empty list of numbers in [0, 1]", self.alpha_grid)
        self.alpha_grid = [float(a) for a in grid]
        _check(_real(self.beta) and 0 <= self.beta <= 1, "beta", "a number in [0, 1]", self.beta)
        _check(self.embedding_bits in (8, 16), "embedding_bits", "8 or 16", self.embedding_bits)
        _check(self.lm_head in LM_HEAD_STORAGE, "lm_head", " or ".join(LM_HEAD_STORAGE), self.lm_head)
        _check(self.re_metric in RE_METRICS, "re_metric", " or ".join(sorted(RE_METRICS)), self.re_metric)
        _check(isinstance(self.grid_tokens, int) and self.grid_tokens >= 1, "grid_tokens", "an integer >= 1",
               self.grid_tokens)
        _check(_real(self.a16_budget) and 0 <= self.a16_budget <= 1, "a16_budget", "a share of MACs in [0, 1]",
               self.a16_budget)
        _check(_real(self.a16_range_gain) and 1 <= self.a16_range_gain <= 256, "a16_range_gain",
               "a number in [1, 256]", self.a16_range_gain)
        _check(_real(self.a8_range_gain) and 1 <= self.a8_range_gain <= 16, "a8_range_gain", "a number in [1, 16]",
               self.a8_range_gain)
        _check(self.weight_rounding in WEIGHT_ROUNDINGS, "weight_rounding", " or ".join(WEIGHT_ROUNDINGS),
               self.weight_rounding)
        _check(_real(self.gptq_damp) and 0 < self.gptq_damp <= 100, "gptq_damp", "a number in (0, 100]",
               self.gptq_damp)
        _check(self.output_grid in OUTPUT_GRIDS, "output_grid", " or ".join(OUTPUT_GRIDS), self.output_grid)
        _check(_real(self.output_headroom) and 1 <= self.output_headroom <= 256, "output_headroom",
               "a number in [1, 256]", self.output_headroom)
        _check(self.alpha_search in ALPHA_SEARCHES, "alpha_search", " or ".join(ALPHA_SEARCHES), self.alpha_search)

    def budget_for(self, module_name: str) -> float:
        from fnmatch import fnmatchcase

        for pattern, budget in self.layer_budgets.items():
            if fnmatchcase(module_name, pattern):
                return budget
        return self.budget_bits

    def params(self) -> dict:
        """Plain-data form for the artifact manifest."""
        return dataclasses.asdict(self)


def _check(ok, key: str, allowed: str, value) -> None:
    if not ok:
        raise ConfigError(f"quantizer.{key} must be {allowed}, got {value!r}")


def _real(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _str_list(xs) -> bool:
    return isinstance(xs, (list, tuple)) and all(isinstance(x, str) and x for x in xs)


def _budget(key: str, value) -> float:
    _check(_real(value) and 1 <= value <= MAX_BITS, key, f"a number in [1, {MAX_BITS}]", value)
    return float(value)
