"""Qualcomm AIMET as a quantizer: the flow Qualcomm's own LLM deployments use, with the HTP config of the SoC.

AIMET quantizes the whole graph at once (harness/quant/aimet_flow.py), so this quantizer needs the loaded model:
`calibrate` runs AIMET and keeps each linear's result, `quantize_linear` hands it over. budget_bits is AIMET's weight
width (4 or 8, per-output-channel symmetric); act_bits its activation width (8, or 16 = A16W8, which QNN HTP and
our runtime's NPU lane run; conf/npu_recipe/aimet.yaml selects it where a run names an NPU). The SoC comes from
conf/npu/ (sm8750 -> AIMET's htp_v79 config).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from harness.quant.aimet_flow import WEIGHT_METHODS, AimetRecipe, run_aimet
from harness.quant.base import LayerResult, Quantizer, register
from harness.quant.calibrate import LinearStats, check_calibration, collect_stats
from harness.quant.config import QuantizerConfig, _check

WEIGHT_BITS = (4, 8)  # AIMET's int4 / int8 parameter types with HTP's per-channel grids


@dataclass
class AimetConfig(QuantizerConfig):
    name: str = "aimet"
    budget_bits: float = 8.0
    act_bits: int = 8  # 8 or 16 (AIMET's activation_type int8 / int16)
    weight_method: str = "seq_mse"  # seq_mse, adaround or minmax (aimet_flow.WEIGHT_METHODS)
    npu: str = "sm8750"  # conf/npu/<name>: the SoC whose HTP config AIMET simulates (htp_<arch>)
    optimize_windows: int = 4  # calibration windows the weight method optimizes on (all 16 calibrate ranges)
    seq_mse_candidates: int = 20  # AIMET's default
    adaround_iterations: int = 1000  # per linear (AIMET recommends 10k; 210 linears x 10k is hours on 2 cores)

    def __post_init__(self):
        super().__post_init__()
        _check(self.budget_bits in WEIGHT_BITS, "budget_bits", "4 or 8 (AIMET's int4 / int8 weights)",
               self.budget_bits)
        _check(not self.layer_budgets, "layer_budgets", "empty (AIMET gives every linear budget_bits)",
               self.layer_budgets)
        _check(self.act_bits in (8, 16), "act_bits", "8 or 16", self.act_bits)
        _check(self.weight_method in WEIGHT_METHODS, "weight_method", " or ".join(WEIGHT_METHODS),
               self.weight_method)
        _check(self.a16_budget == 0, "a16_budget", "0 (AIMET's activation width is quantizer.act_bits)",
               self.a16_budget)
        _check(isinstance(self.optimize_windows, int) and self.optimize_windows >= 1, "optimize_windows",
               "an integer >= 1", self.optimize_windows)
        _check(isinstance(self.seq_mse_candidates, int) and self.seq_mse_candidates >= 2, "seq_mse_candidates",
               "an integer >= 2", self.seq_mse_candidates)
        _check(isinstance(self.adaround_iterations, int) and self.adaround_iterations >= 1, "adaround_iterations",
               "an integer >= 1", self.adaround_iterations)
        from harness.npu.config import load_npu_config

        try:
            self._htp_arch = load_npu_config(self.npu).htp_arch
        except ValueError as e:
            _check(False, "npu", str(e), self.npu)

    def recipe(self) -> AimetRecipe:
        return AimetRecipe(weight_bits=int(self.budget_bits), act_bits=self.act_bits,
                           config_file=f"htp_{self._htp_arch}", weight_method=self.weight_method,
                           optimize_windows=self.optimize_windows, seq_mse_candidates=self.seq_mse_candidates,
                           adaround_iterations=self.adaround_iterations)


@register
class AimetQuantizer(Quantizer):
    name = "aimet"
    Config = AimetConfig
    needs_model = True  # calibrate() runs AIMET on the whole graph (harness/quant/cache.py loads the model)
    budgets = WEIGHT_BITS

    def calibrate(self, model: nn.Module, calibration) -> None:
        calibration = check_calibration(calibration, model.config.vocab_size)
        self.stats = collect_stats(model, calibration, sample_rows=self.config.grid_tokens)  # (layer selection)
        self.fitted = run_aimet(model, calibration, self.config.recipe())

    def quantize_linear(self, name: str, weight: torch.Tensor, stats: LinearStats, budget: float) -> LayerResult:
        q = self.fitted[name]
        if q.codes.shape != weight.shape:
            raise RuntimeError(f"{name}: AIMET's codes are {tuple(q.codes.shape)}, the weight {tuple(weight.shape)}")
        return LayerResult(q, info={"aimet": self.config.weight_method, "act_bits": q.act_bits})
