"""Fake-quant reference: a Hugging Face Llama model that computes what the runtime computes from an artifact.

Per quantized linear (docs/quantized-artifact.md), for x float32 [..., D]:
    xq  = clamp(round_half_even(x * (in_scale / act_scale)), -127, 127)     integer-valued float32 (A16: +-32767)
    acc = xq @ codes^T                                                      int32 sums (numerics.integer_matmul)
    y   = acc * (act_scale * w_scale)                                      float outputs, or with P.out_step
    y   = requantize(acc, act_scale * w_scale / out_step, act_bits) * out_step   the NPU's (numerics.py, "Outputs")
On CPUs with int8 dot products (VNNI, AMX) the A8 sums are torch._int_mm's, exact and ~4-5x faster than float32;
elsewhere float32 matmuls on integer-valued tensors, exact while |acc| < 2^24 (D <= 1032 for 8-bit codes) and
otherwise off from the runtime's int32 sum only in the last bit (A16 sums go past 2^24: ~1e-7 relative); there
torch._int_mm is ~20x slower than float32, and int8 @ int8 wraps. Weight-only layers (no act_scale) compute (x * in_scale) @ codes^T * w_scale. Shadow-outlier layers add the
float side path x[..., idx] @ outlier_weight^T (their in_scale is 0 on those input channels).

Two variants isolate where a quantizer's error comes from (the fidelity kind reports all three against FP16):
activations="dynamic" quantizes each token's x * in_scale with its own scale max|.| / 127 instead of the static
act_scale; activations="float" keeps activations in float (weights only quantized). The runtime computes "static".
numerics="npu" (default) requantizes the outputs of every linear that has an output grid, as an NPU and the runtime's
accelerator lane do; numerics="cpu-float" keeps them in float (a CPU-only system: no NPU computes it). The integer
sums behind a requantized output are exact (float64 where float32 could round them), so its codes are the runtime's.

Embeddings (and an untied LM head, at any per-row widths) are dequantised once (codes * w_scale) into the float tables
(a tied model whose artifact has its own LM head is untied first); norms are loaded
from the artifact; everything else (RoPE, attention, SwiGLU) is the FP model's own float32 code.
"""
from __future__ import annotations

import copy

import torch
from torch import nn

from harness.artifact import Artifact, QuantLinear
from harness.quant.numerics import (ACT_QMAX, act_qmax, int8_matmul_native, integer_matmul, quantize_activations,
                                    requant_ratio, requantize)

OUTLIER_IDX = "outlier_idx"  # int64 [k]: input channels computed in float beside the INT8 matmul
OUTLIER_WEIGHT = "outlier_weight"  # float16 [C, k]: their FP weights


ACTIVATIONS = ("static", "dynamic", "float")
NUMERICS = ("npu", "cpu-float")  # requantized outputs where the artifact has grids, or float outputs


def quant_linear_forward(x: torch.Tensor, q: QuantLinear, codes_t: torch.Tensor | None = None,
                         activations: str = "static", numerics: str = "npu") -> torch.Tensor:
    """y [..., C] for x [..., D]; codes_t is codes^T as float32 [D, C] when the caller keeps it around."""
    if q.act_scale is None or activations == "float":
        return ((x * q.in_scale) @ (q.codes.float().t() if codes_t is None else codes_t)) * q.w_scale
    if activations == "dynamic":
        xs = x * q.in_scale
        scale = xs.abs().amax(-1, keepdim=True).clamp_min(1e-12) / ACT_QMAX  # [..., 1]: one scale per token
        xq = torch.clamp(torch.round(xs / scale), -ACT_QMAX, ACT_QMAX)
        return integer_matmul(xq, q.codes, codes_t) * (scale * q.w_scale)
    xq = quantize_activations(x, q.in_scale, q.act_scale, q.act_bits)
    if q.out_step is not None and numerics == "npu":
        return requantize(exact_sums(xq, q), requant_ratio(q.act_scale, q.w_scale, q.out_step), q.act_bits).float() \
            * q.out_step
    return integer_matmul(xq, q.codes, codes_t, xq_fits_int8=q.act_bits <= 8) * (q.act_scale * q.w_scale)


def exact_sums(xq: torch.Tensor, q: QuantLinear) -> torch.Tensor:
    """[..., C] integer sums xq @ codes^T, exact: in float32 while no sum can reach 2^24, else float64."""
    a8 = q.act_bits <= 8
    if act_qmax(q.act_bits) * 128 * q.codes.shape[1] < 2 ** 24 or (a8 and int8_matmul_native()):
        return integer_matmul(xq, q.codes, xq_fits_int8=a8)  # float32 below 2^24, or torch._int_mm's int32
    return xq.double() @ q.codes.double().t()


class FakeQuantLinear(nn.Module):
    def __init__(self, q: QuantLinear, outlier_idx: torch.Tensor | None = None,
                 outlier_weight: torch.Tensor | None = None, activations: str = "static", numerics: str = "npu"):
        super().__init__()
        self.q, self.activations, self.numerics = q, activations, numerics
        self.register_buffer("codes_t", q.codes.float().t().contiguous(), persistent=False)  # [D, C]
        self.outlier_idx = outlier_idx
        self.outlier_weight_t = None if outlier_weight is None else outlier_weight.float().t().contiguous()  # [k, C]
        self.in_features, self.out_features = q.codes.shape[1], q.codes.shape[0]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.float()
        y = quant_linear_forward(x, self.q, self.codes_t, self.activations, self.numerics)
        if self.outlier_idx is not None:
            y = y + x[..., self.outlier_idx] @ self.outlier_weight_t
        return y.to(dtype)


def build_fakequant_model(artifact: Artifact, fp_model: nn.Module, activations: str = "static",
                          numerics: str = "npu") -> nn.Module:
    """A float32 copy of fp_model whose quantized parts are replaced by the artifact's (fp_model is not modified);
    `activations`: static (the runtime's numerics), dynamic (per-token scales) or float (weight-only); `numerics`:
    npu (requantized outputs where the artifact has output grids) or cpu-float (float outputs)."""
    if activations not in ACTIVATIONS:
        raise ValueError(f"activations must be one of {ACTIVATIONS}, got {activations!r}")
    if numerics not in NUMERICS:
        raise ValueError(f"numerics must be one of {NUMERICS}, got {numerics!r}")
    model = copy.deepcopy(fp_model).float().eval()
    others = artifact.others
    head = model.get_submodule("lm_head")
    if "lm_head.codes" in others and head.weight is model.get_submodule("model.embed_tokens").weight:
        head.weight = nn.Parameter(head.weight.detach().clone())  # lm_head=budget gave a tied head its own table
    for name, q in artifact.linears.items():
        parent_name, _, attr = name.rpartition(".")
        parent = model.get_submodule(parent_name)
        if not isinstance(getattr(parent, attr, None), nn.Linear):
            raise ValueError(f"artifact layer {name} is not a linear layer of the given model")
        idx, ow = others.get(f"{name}.{OUTLIER_IDX}"), others.get(f"{name}.{OUTLIER_WEIGHT}")
        setattr(parent, attr, FakeQuantLinear(q, idx, ow, activations, numerics))
    with torch.no_grad():
        for key, t in others.items():
            module_name, _, tensor_name = key.rpartition(".")
            if tensor_name == "weight":  # norms, FP16 embeddings and projections kept in float
                model.get_submodule(module_name).weight.copy_(t.float())
            elif tensor_name == "codes" and module_name in ("model.embed_tokens", "lm_head"):
                table = t.float() * others[f"{module_name}.w_scale"].float()[:, None]
                model.get_submodule(module_name).weight.copy_(table)
    return model
