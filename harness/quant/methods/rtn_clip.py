"""Round-to-nearest with clipping: the worked example of docs/adding-a-quantizer.md, shipped so that it can be
compared with the built-ins (`make compare-quantizers`). tests/quant/test_doc_example.py keeps this file and the
doc identical."""
from dataclasses import dataclass

import torch

from harness.artifact import QuantLinear
from harness.quant.base import LayerResult, Quantizer, register
from harness.quant.config import QuantizerConfig
from harness.quant.numerics import act_scale_for, quantize_per_channel


@dataclass
class RTNClipConfig(QuantizerConfig):
    name: str = "rtn_clip"
    clip_ratio: float = 1.0          # a key only this quantizer has; unknown keys are rejected


@register
class RTNClip(Quantizer):
    name = "rtn_clip"
    Config = RTNClipConfig

    def quantize_linear(self, name, weight, stats, budget):
        bits = torch.full((weight.shape[0],), int(budget))
        peak = weight.abs().amax(1, keepdim=True) * self.config.clip_ratio
        codes, scale = quantize_per_channel(torch.clamp(weight, -peak, peak), bits)
        ones = torch.ones(weight.shape[1])                       # no smoothing
        return LayerResult(QuantLinear(codes, bits.to(torch.uint8), scale, ones, act_scale_for(stats.in_max, ones)))
