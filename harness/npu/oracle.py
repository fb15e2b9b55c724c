"""QNN HTP as the numerics oracle of the accelerator half: per layer, the same activation codes through HTP's
compiled graph (harness/npu/graph.py), the fake-quant reference and the runtime's accelerator lane, compared on
the output grid in LSBs.

Inputs are what each linear sees in the fake-quant model on real text; output grids are the artifact's (static, as
a deployed graph has them: harness/quant/outputs.py), so test text may clip, identically on every side. An artifact
with float outputs has none: its grids are then calibrated here the same way on a calibration window. The reference
is exact: integer codes multiplied in float64, requantized as quant/numerics.py defines it. The runtime's lane is
its own C code (harness.engine.capi.accel_linear: quantization at 8 or 16 bits, this CPU's kernel, requantization
to the same grid).
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from harness.artifact import Artifact, QuantLinear
from harness.npu.compile import CompiledLayer, compiled_layer
from harness.npu.config import NpuConfig
from harness.npu.graph import (act_grid, input_codes, layer_feeds, layer_graph, layer_linears, output_codes,
                               output_steps_of, reference_codes)
from harness.npu.htp import open_session
from harness.quant.config import QuantizerConfig
from harness.quant.numerics import output_steps


def capture_inputs(fq_model: nn.Module, ids: torch.Tensor) -> dict[str, torch.Tensor]:
    """linear name -> float32 [T, D]: the input each fake-quant linear gets when the model reads ids [T]."""
    from harness.quant.fakequant import FakeQuantLinear

    seen: dict[str, torch.Tensor] = {}
    hooks = [m.register_forward_pre_hook(lambda mod, args, n=name: seen.__setitem__(n, args[0][0].detach().float()))
             for name, m in fq_model.named_modules() if isinstance(m, FakeQuantLinear)]
    try:
        with torch.no_grad():
            fq_model(ids.reshape(1, -1))
    finally:
        for h in hooks:
            h.remove()
    return seen


def reference_output(q: QuantLinear, x: torch.Tensor, bits: int | None = None) -> torch.Tensor:
    """float64 [T, C]: the matmul of x's activation codes with the weight codes, exactly, times both scales."""
    acc = input_codes(x, q, bits).double() @ q.codes.double().t()
    return acc * act_grid(q, bits).scale * q.w_scale.double()


def output_scales(linears: dict[str, QuantLinear], inputs: dict[str, torch.Tensor], bits: int | None = None,
                  grid: str = QuantizerConfig.output_grid,
                  headroom: float = QuantizerConfig.output_headroom) -> dict[str, torch.Tensor]:
    """linear name -> float64 [C] static output steps at the graph's width: the artifact's grid (output_steps_of),
    or, for a linear with float outputs, numerics.output_steps over its largest |output| on `inputs` (a calibration
    window) with `grid` and `headroom` (by default the quantizer's)."""
    steps = {}
    for name, q in linears.items():
        own = output_steps_of(q, bits)
        if own is None:
            peaks = reference_output(q, inputs[name], bits).abs().amax(0)  # [C]
            own = output_steps(peaks, act_grid(q, bits).bits, grid, headroom).double()
        steps[name] = own
    return steps


@dataclass(frozen=True)
class Agreement:
    """HTP's output codes against another computation's, on one linear."""

    max_lsb: int
    share_differ: float  # fraction of outputs whose codes differ
    mean_signed: float  # mean of (HTP - other): a bias shows here

    @classmethod
    def of(cls, htp: torch.Tensor, other: torch.Tensor) -> "Agreement":
        d = htp - other
        return cls(int(d.abs().max()), float((d != 0).double().mean()), float(d.double().mean()))


@dataclass(frozen=True)
class LayerResult:
    layer: int
    compiled: CompiledLayer
    vs_reference: dict[str, Agreement]  # linear name -> HTP vs the fake-quant reference
    vs_runtime: dict[str, Agreement]  # linear name -> HTP vs the runtime's accelerator lane
    htp_run_s: float  # wall time of the simulator on this layer's batch
    widths: dict[str, int]  # linear name -> its activation width on HTP (8 or 16): the unit of its LSBs

    def worst(self, which: str, bits: int = 8) -> Agreement | None:
        """The layer's linears of one width pooled: the largest max_lsb, the mean share (each linear weighs the
        same), the mean signed difference; None when the layer has no such linear."""
        agreements = [a for n, a in getattr(self, which).items() if self.widths[n] == bits]
        if not agreements:
            return None
        return Agreement(max(a.max_lsb for a in agreements), float(np.mean([a.share_differ for a in agreements])),
                         float(np.mean([a.mean_signed for a in agreements])))


@dataclass
class PreparedLayer:
    """One decoder layer's accelerator graph, compiled for the SoC, with its test batch as graph feeds."""
    layer: int
    linears: dict[str, QuantLinear]
    scales: dict[str, torch.Tensor]  # static output steps [C] per linear, from the calibration window
    graph: object  # graph.LayerGraph
    compiled: CompiledLayer
    feeds: dict[str, np.ndarray]
    test: dict[str, torch.Tensor]  # each linear's float input rows [N, D] on the test batch


def prepared_layers(artifact: Artifact, fq_model: nn.Module, calibration_ids: torch.Tensor, test_ids: torch.Tensor,
                    npu: NpuConfig, bits: int | None = None, layers: list[int] | None = None) -> Iterator[PreparedLayer]:
    """For each decoder layer (all by default): its graph with output scales from the calibration window, compiled for
    npu's SoC (cached), and the test batch's codes (test_ids has the graphs' batch size, npu.chunk_tokens); `bits`
    (default npu.activation_bits) is the least activation width (graph.act_grid)."""
    bits = bits or npu.activation_bits
    calibration = capture_inputs(fq_model, calibration_ids)
    test = capture_inputs(fq_model, test_ids)
    n_layers = int(artifact.config["num_hidden_layers"])
    for layer in (range(n_layers) if layers is None else layers):
        linears = layer_linears(artifact, layer)
        scales = output_scales(linears, calibration, bits)
        graph = layer_graph(linears, scales, bits, tokens=len(test_ids))
        yield PreparedLayer(layer, linears, scales, graph, compiled_layer(graph, npu),
                            layer_feeds(graph, linears, test, bits), test)


def layer_agreement(artifact: Artifact, fq_model: nn.Module, calibration_ids: torch.Tensor, test_ids: torch.Tensor,
                    npu: NpuConfig, bits: int | None = None, layers: list[int] | None = None) -> Iterator[LayerResult]:
    """For each prepared layer (prepared_layers): run the test batch through HTP's simulator and compare."""
    import time

    from harness.engine.capi import accel_linear

    bits = bits or npu.activation_bits
    for p in prepared_layers(artifact, fq_model, calibration_ids, test_ids, npu, bits, layers):
        session = open_session(p.compiled.wrapper, npu)
        t0 = time.perf_counter()
        outs = dict(zip([o.name for o in session.get_outputs()], session.run(None, p.feeds)))
        run_s = time.perf_counter() - t0
        vs_ref, vs_rt, widths = {}, {}, {}
        for name, q in p.linears.items():
            grid = act_grid(q, bits)
            widths[name] = grid.bits
            htp = torch.from_numpy(outs[p.graph.outputs[name]].astype(np.int64)) - grid.zero_point
            steps = p.scales[name]
            vs_ref[name] = Agreement.of(htp, reference_codes(q, p.test[name], steps, bits))
            lane = accel_linear(p.test[name], q.codes, q.w_scale, q.in_scale, act_grid(q, bits).scale,
                                out_step=steps.float(), act_bits=grid.bits)
            vs_rt[name] = Agreement.of(htp, output_codes(lane, steps, grid.bits))
        yield LayerResult(p.layer, p.compiled, vs_ref, vs_rt, run_s, widths)
