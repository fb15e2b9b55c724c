"""Static output grids: each linear's output as an NPU hands it back, requantized to its activation width.

An NPU matmul never returns float: QNN HTP requantizes a quantized MatMul's output to a static grid of the input's
width (docs/npu.md). The quantizer writes that grid into the artifact (`P.out_step`, one step per output channel or
one per linear) so that the QDQ graphs (harness/npu/graph.py), the fake-quant reference and the runtime's
accelerator lane all compute the same codes (numerics.py, "Outputs").

The peaks are the FP linear's largest |output| per channel over the whole calibration set (calibrate.LinearStats
.out_max), widened by `headroom` for text unlike the calibration corpus: a grid at the calibrated peak clips there.
"""
from __future__ import annotations

from dataclasses import replace

import torch

from harness.artifact import QuantLinear
from harness.quant.numerics import output_steps

# The `numerics` column of rows computed with exactly what an NPU computes (harness/runner/store.py); other values
# say how a computation differs from it.
NPU_NUMERICS = "npu"


def with_output_grid(q: QuantLinear, peaks: torch.Tensor, grid: str, headroom: float) -> QuantLinear:
    """The linear with its static output grid at its activation width (grid "none": float outputs, unchanged; a
    weight-only linear has no grid)."""
    if grid == "none" or q.act_scale is None:
        return replace(q, out_step=None)
    return replace(q, out_step=output_steps(peaks, q.act_bits, grid, headroom))


def numerics_summary(grid: str, headroom: float, a16_linears: int, n_linears: int) -> dict:
    """The manifest's "numerics": what the accelerator half computes for the artifact (docs/quantized-artifact.md)."""
    return {"outputs": "float" if grid == "none" else "requantized", "output_grid": grid,
            "output_headroom": headroom, "a16_linears": a16_linears, "linears": n_linears}


def numerics_text(manifest: dict) -> str:
    """What the accelerator half computes for an artifact, from its manifest's "numerics", for rows' notes: 'NPU
    numerics: A8, outputs requantized to static grids per output channel at 4x the calibrated peak'."""
    numerics = manifest.get("numerics") or {}
    if numerics.get("outputs") != "requantized":
        return "float outputs (CPU only: no NPU computes them)"
    wide, n = numerics.get("a16_linears", 0), numerics.get("linears", 0)
    inputs = "A8" if not wide else "A16" if wide == n else f"A8 (A16 on {wide} of {n} linears)"
    grid = "per output channel" if numerics.get("output_grid") == "channel" else "per linear"
    return (f"NPU numerics: {inputs}, outputs requantized to static grids {grid} at "
            f"{numerics.get('output_headroom'):g}x the calibrated peak")


def numerics_column(manifest: dict, numerics: str = "npu", activations: str = "static") -> str:
    """The `numerics` column of rows computed over an artifact with these settings (those of build_fakequant_model,
    or the runtime's lane): NPU_NUMERICS only where they are the NPU's (static activations, requantized outputs)."""
    if activations != "static":
        return f"{activations} activations"
    if numerics != "npu" or (manifest.get("numerics") or {}).get("outputs") != "requantized":
        return "float outputs"
    return NPU_NUMERICS
