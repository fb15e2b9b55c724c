"""The fake-quant model with its accelerator half computed by QNN HTP: quality as the NPU computes it.

Every quantized linear becomes an HtpLinear: the CPU side quantizes its input (input_codes, the runtime's rounding),
HTP's simulator runs the linear's compiled graph (graph.py) in batches of npu.chunk_tokens rows, and the output codes
come back dequantized (code * step, per output channel) for the CPU side, which stays the fake-quant model's float32
code (norms, RoPE, attention, SwiGLU, and the float side path of shadow outliers). Output steps are the artifact's
static grids (harness/quant/outputs.py); an artifact with float outputs gets them calibrated on a window the same
way (oracle.output_scales).
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

from harness.artifact import Artifact
from harness.npu.compile import compiled_layer
from harness.npu.config import NpuConfig
from harness.npu.graph import act_grid, input_codes, layer_graph
from harness.npu.htp import open_session
from harness.npu.oracle import capture_inputs, output_scales


class HtpLinear(nn.Module):
    def __init__(self, name: str, fq, out_scale: torch.Tensor, npu: NpuConfig, bits: int):
        super().__init__()
        self.q, self.bits, self.out_scale, self.rows = fq.q, bits, out_scale, npu.chunk_tokens
        grid = act_grid(fq.q, bits)
        self.outlier_idx, self.outlier_weight_t = fq.outlier_idx, fq.outlier_weight_t
        graph = layer_graph({name: fq.q}, {name: out_scale}, bits, npu.chunk_tokens)
        self.compiled = compiled_layer(graph, npu)
        self.session = open_session(self.compiled.wrapper, npu)
        self.input_name = next(iter(graph.inputs))
        self.zero_point = grid.zero_point
        self.dtype = np.uint8 if grid.bits == 8 else np.uint16

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape, dtype = x.shape, x.dtype
        rows = x.reshape(-1, shape[-1]).float()  # [N, D]
        codes = (input_codes(rows, self.q, self.bits) + self.zero_point).numpy().astype(self.dtype)
        n = codes.shape[0]
        padded = np.full((-(-n // self.rows) * self.rows, codes.shape[1]), self.zero_point, dtype=self.dtype)
        padded[:n] = codes
        out = [self.session.run(None, {self.input_name: padded[i:i + self.rows]})[0]
               for i in range(0, len(padded), self.rows)]
        y = (torch.from_numpy(np.concatenate(out)[:n].astype(np.float32)) - self.zero_point) * self.out_scale.float()
        if self.outlier_idx is not None:
            y = y + rows[:, self.outlier_idx] @ self.outlier_weight_t
        return y.reshape(*shape[:-1], -1).to(dtype)


def build_htp_model(artifact: Artifact, fp_model: nn.Module, npu: NpuConfig, calibration_ids: torch.Tensor,
                    bits: int | None = None) -> nn.Module:
    """The fake-quant model of `artifact` whose quantized linears run on QNN HTP for npu's SoC, activations at least
    `bits` wide (default npu.activation_bits; graph.act_grid); graphs compiled once and cached (compile.py)."""
    from harness.quant.fakequant import FakeQuantLinear, build_fakequant_model

    bits = bits or npu.activation_bits
    model = build_fakequant_model(artifact, fp_model)
    own = all(q.out_step is not None for q in artifact.linears.values())
    inputs = {} if own else capture_inputs(model, calibration_ids)
    scales = output_scales(artifact.linears, inputs, bits)
    for name, module in list(model.named_modules()):
        if isinstance(module, FakeQuantLinear):
            parent, _, attr = name.rpartition(".")
            setattr(model.get_submodule(parent), attr, HtpLinear(name, module, scales[name], npu, bits))
    return model
