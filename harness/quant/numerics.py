"""Integer grids shared by every quantizer and by the fake-quant reference (docs/quantized-artifact.md).

Weights: a channel of b bits holds codes q in [-2^(b-1), 2^(b-1)-1] and dequantises to q * scale. The scale is
signed: scale = -m / 2^(b-1) where m is the channel's largest-magnitude weight, so m itself lands exactly on the
extra negative level -2^(b-1). This uses all 2^b levels (a 1-bit channel holds {m, 0}) and gives the step
S_b = max|W| / 2^(b-1) = 2 max|W| / 2^b that section 4.1's closed-form relative error assumes. No zero point: the
grid is symmetric about zero up to that one extra level, as the NPU requires.

One exception keeps every grid representable on an NPU: Qualcomm's HTP takes INT8 weights with a positive
per-channel scale only (a negative scale is computed wrongly, measured with onnxruntime-qnn), so a channel's codes are
negated with its scale on export. An 8-bit channel with a positive peak would need code +128 there; it takes the
scale m / 127 instead (codes in [-127, 127], the peak on +127). Below 8 bits the negated codes always fit.

Activations: static per-tensor symmetric INT8, round half to even, clamp to [-127, 127]; a linear the quantizer gives
16-bit activations (A16, for QNN HTP's A16W8 matmuls) clamps to [-32767, 32767] on its own act_scale grid.

Outputs (the NPU's numerics, docs/quantized-artifact.md "Requantized outputs"): an NPU matmul hands its output back
requantized to a static grid of its input's width, never in float. A linear with `out_step` [C] computes
    code[t, c] = clamp(round_half_even(float64(acc[t, c]) * ratio[c]), -2^(b-1), 2^(b-1) - 1)
    ratio[c]   = float64(act_scale) * float64(w_scale[c]) / float64(out_step[c])
    y[t, c]    = float32(code[t, c]) * out_step[c]                                   (the CPU side, float32)
with b its activation width and acc the exact integer sum. Every step is one IEEE operation, so torch and the C++
runtime compute the same codes bit for bit. The grid (output_steps) is headroom times each channel's calibrated
output peak (grid "channel"; a dead channel floored at CHANNEL_FLOOR of the linear's largest) or the linear's largest
(grid "tensor"), over the width's qmax.
"""
from __future__ import annotations

import os

import torch

from harness.host import cpu_flags

ACT_QMAX = 127


def code_range(bits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(lo, hi) per channel, int64 [C] each: the codes a b-bit channel may hold."""
    bits = bits.to(torch.int64)
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def signed_scale(peak: torch.Tensor, bits: torch.Tensor) -> torch.Tensor:
    """float32 scale that maps `peak` (the signed largest-magnitude weight) onto code -2^(b-1), or for an 8-bit
    channel with a positive peak onto +127 (module docstring); 1 where peak == 0."""
    bits = bits.to(torch.int64)
    scale = -peak / (1 << (bits - 1)).to(peak.dtype)
    scale = torch.where((bits == 8) & (peak > 0), peak / 127, scale)
    return torch.where(peak == 0, torch.ones_like(scale), scale).float()


def row_peaks(w: torch.Tensor) -> torch.Tensor:
    """float32 [C]: each row's weight of largest magnitude, with its sign."""
    idx = w.abs().argmax(dim=1, keepdim=True)
    return w.gather(1, idx).squeeze(1)


def tensor_peak(w: torch.Tensor) -> torch.Tensor:
    """float32 []: the tensor's weight of largest magnitude, with its sign."""
    return w.flatten()[w.abs().argmax()]


def quantize_rows(w: torch.Tensor, bits: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """int8 [C, D] codes of w [C, D] for per-row bit-widths bits [C] and signed scales scale [C]."""
    lo, hi = code_range(bits)
    q = torch.round(w / scale[:, None])  # torch.round is round-half-to-even
    return torch.clamp(q, lo[:, None].to(q.dtype), hi[:, None].to(q.dtype)).to(torch.int8)


def quantize_per_channel(w: torch.Tensor, bits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(codes int8 [C, D], w_scale float32 [C]): each output channel on its own signed grid of bits[c] bits."""
    scale = signed_scale(row_peaks(w), bits)
    return quantize_rows(w, bits, scale), scale


def quantize_per_tensor(w: torch.Tensor, bits: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(codes, w_scale [C]) with one grid for the whole tensor (w_scale repeats one value)."""
    c = w.shape[0]
    b = torch.full((c,), bits, dtype=torch.int64)
    scale = signed_scale(tensor_peak(w), torch.tensor(bits)).expand(c).clone()
    return quantize_rows(w, b, scale), scale


def act_scale_for(in_max: torch.Tensor, in_scale: torch.Tensor) -> torch.Tensor:
    """float32 []: static per-tensor scale of the smoothed input x * in_scale, from calibration max-abs in_max [D].

    The per-tensor max of the smoothed input is the max over channels of the per-channel max, so the calibration
    statistics give it exactly without another pass over the data.
    """
    peak = (in_max * in_scale).max().clamp_min(1e-8)
    return (peak / ACT_QMAX).float()


def act_qmax(act_bits: int) -> int:
    """The largest activation code at act_bits: 127 (the runtime's INT8) or 32767 (A16, HTP only)."""
    return (1 << (act_bits - 1)) - 1


def quantize_activations(x: torch.Tensor, in_scale: torch.Tensor, act_scale: torch.Tensor,
                         act_bits: int = 8) -> torch.Tensor:
    """Integer-valued float32 [..., D]: clamp(round_half_even(x * in_scale / act_scale), -qmax, qmax), qmax = 127
    at 8 bits."""
    m = in_scale / act_scale  # [D], what the runtime precomputes once per layer
    qmax = act_qmax(act_bits)
    return torch.clamp(torch.round(x * m), -qmax, qmax)


def quantize_outputs(y: torch.Tensor, step: float, bits: int) -> torch.Tensor:
    """Integer-valued [...] codes of an NPU matmul's output on its per-tensor grid of `bits` (uint{bits} around its
    zero point): clamp(round_half_even(y / step), -2^(bits-1), 2^(bits-1) - 1)."""
    qmax = act_qmax(bits)
    return torch.clamp(torch.round(y / step), -qmax - 1, qmax)


OUTPUT_GRIDS = ("channel", "tensor", "none")  # "none": float outputs (no NPU computes them; the CPU-only lane)
CHANNEL_FLOOR = 2.0 ** -8  # a channel's output grid spans at least this share of its linear's (dead channels)


def output_steps(peaks: torch.Tensor, act_bits: int, grid: str, headroom: float) -> torch.Tensor:
    """float32 [C] static output steps from the calibrated output peaks |y| [C] of a linear (module docstring)."""
    if grid not in OUTPUT_GRIDS[:2]:
        raise ValueError(f"output grid must be one of {OUTPUT_GRIDS[:2]}, got {grid!r}")
    peaks = peaks.double().abs().clamp_min(1e-12)
    top = peaks.max()
    peaks = peaks.clamp_min(top * CHANNEL_FLOOR) if grid == "channel" else top.expand_as(peaks)
    return (headroom * peaks / act_qmax(act_bits)).float()


def requant_ratio(act_scale: torch.Tensor, w_scale: torch.Tensor, out_step: torch.Tensor) -> torch.Tensor:
    """float64 [C]: what multiplies a linear's exact integer sums to give its output codes (module docstring)."""
    return act_scale.double() * w_scale.double() / out_step.double()


def requantize(acc: torch.Tensor, ratio: torch.Tensor, bits: int) -> torch.Tensor:
    """Integer-valued float64 [..., C] output codes of exact integer sums acc [..., C] (any dtype holding them
    exactly: int64, float64): clamp(round_half_even(acc * ratio), -2^(bits-1), 2^(bits-1) - 1)."""
    qmax = act_qmax(bits)
    return torch.clamp(torch.round(acc.double() * ratio), -qmax - 1, qmax)


def int8_matmul_native() -> bool:
    """Whether torch._int_mm runs on int8 hardware here: x86 with AVX-512 VNNI, AVX-VNNI or AMX. On the 2-vCPU EPYC
    with AVX-512 VNNI (2026-12-05) it multiplies [2048, 576] x [576, 1536] in 4.6 ms against float32's 23 ms; on the
    AVX2-only EPYC it was ~20x slower than float32. EDGEFLOW_INT8_MATMUL=1 or 0 decides instead."""
    forced = os.environ.get("EDGEFLOW_INT8_MATMUL", "")
    if forced in ("0", "1"):
        return forced == "1"
    return bool(cpu_flags() & {"avx512_vnni", "avx_vnni", "amx_int8"})


def integer_matmul(xq: torch.Tensor, codes: torch.Tensor, codes_t: torch.Tensor | None = None,
                   xq_fits_int8: bool = True) -> torch.Tensor:
    """float32 [..., C] = xq @ codes^T for integer-valued xq [..., D] and codes int8 [C, D]: the runtime's int32
    sums. Where the CPU multiplies int8 natively (int8_matmul_native) and xq fits int8 (A8), torch._int_mm computes
    them exactly; elsewhere a float32 matmul (codes_t: codes^T as float32 [D, C], when the caller keeps it), exact
    while every partial sum stays below 2^24 and otherwise off in its last bit (docs/quantized-artifact.md)."""
    if xq_fits_int8 and codes.dtype == torch.int8 and int8_matmul_native():
        acc = torch._int_mm(xq.reshape(-1, xq.shape[-1]).to(torch.int8), codes.t())  # int32 [N, C]
        return acc.reshape(*xq.shape[:-1], codes.shape[0]).float()
    return xq @ (codes.float().t() if codes_t is None else codes_t)
