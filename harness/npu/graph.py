"""A decoder layer's accelerator half as a QDQ ONNX graph that QNN's HTP compiler accepts.

EdgeFlow places the seven INT8 matmuls of a layer (q, k, v, o, gate, up, down) on the NPU and everything between
them (norms, RoPE, attention, SwiGLU) on the CPU, so one graph per layer holds seven independent matmuls. For each
quantized linear of the artifact (docs/quantized-artifact.md), with b its activation width (8, or 16 where the
quantizer chose A16 or npu.activation_bits asks for it) and Z = 2^(b-1):

    x  uint{b} [T, D]  input codes: the CPU's quantized activations plus Z (scale s_x, zero point Z)
       -> DequantizeLinear -> MatMul <- DequantizeLinear <- W int8 [D, C], per-channel scale |w_scale| [C], axis 1
       -> QuantizeLinear (scale s_y, zero point Z) -> y uint{b} [T, C]

The CPU quantizes the activations (its rounding, clamped to +-(Z-1) like the runtime) and hands codes over, so the
graph starts at the integers. HTP needs positive weight scales: a channel whose scale is negative is exported with
its codes negated (harness/quant/numerics.py keeps that within INT8). A16 runs the same weights with uint16
activations: an 8-bit linear's static range at 16-bit resolution (s_x * 127 / 32767), or the quantizer's own A16
grid. Linears that share their
input quantization (q, k, v; gate, up) share one graph input. The output is requantized, always (an INT8 MatMul on
HTP has a quantized output), to the artifact's static output grid (`P.out_step`, harness/quant/outputs.py: the grid
the fake-quant reference and the runtime's accelerator lane requantize to; see output_steps_of).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from harness.artifact import Artifact, QuantLinear
from harness.quant.numerics import act_qmax, quantize_activations, quantize_outputs, requant_ratio, requantize

OPSET = 21  # QuantizeLinear/DequantizeLinear with uint16 and per-axis scales


@dataclass(frozen=True)
class ActGrid:
    """A linear's activation grid: codes clamp(round_half_even(x * in_scale / scale), -qmax, qmax)."""

    scale: float
    bits: int  # 8 or 16: uint8 or uint16 on HTP, for the input and the output alike

    @property
    def qmax(self) -> int:  # 127 or 32767: symmetric, as the runtime clamps
        return act_qmax(self.bits)

    @property
    def zero_point(self) -> int:
        return self.qmax + 1


def act_grid(q: QuantLinear, bits: int | None = None) -> ActGrid:
    """The linear's activation grid at its own width (q.act_bits: 16 where the quantizer chose A16) or at least
    `bits` wide over the same range (npu.activation_bits=16: an 8-bit linear's calibrated range at 16-bit
    resolution)."""
    if q.act_scale is None:
        raise ValueError("a weight-only linear has no static activation scale: HTP runs W8A8 and W8A16 matmuls only")
    width = max(bits or 8, q.act_bits)
    return ActGrid(float(q.act_scale) * act_qmax(q.act_bits) / act_qmax(width), width)


def output_steps_of(q: QuantLinear, bits: int | None = None) -> torch.Tensor | None:
    """float64 [C]: the artifact's output grid at the graph's width (act_grid): the same range at 16-bit resolution
    when `bits` widens an 8-bit linear; None for an artifact with float outputs (it has no grid)."""
    if q.out_step is None:
        return None
    return q.out_step.double() * (act_qmax(q.act_bits) / act_grid(q, bits).qmax)


def reference_codes(q: QuantLinear, x: torch.Tensor, steps: torch.Tensor, bits: int | None = None) -> torch.Tensor:
    """int64 [T, C]: the output codes of x float32 [T, D] on the output grid `steps` [C], exactly as the numerics
    define them (quant/numerics.py "Outputs"): exact integer sums (float64 holds them), then requantize."""
    grid = act_grid(q, bits)
    acc = input_codes(x, q, bits).double() @ q.codes.double().t()
    ratio = requant_ratio(torch.tensor(grid.scale, dtype=torch.float32), q.w_scale, steps.float())
    return requantize(acc, ratio, grid.bits).to(torch.int64)


def matmul_name(linear: str) -> str:
    """The MatMul node's name, which QNN's per-operator profile repeats: 'layer3_q_proj'."""
    parts = linear.split(".")
    layer = next((p for p in parts if p.isdigit()), "x")
    return f"layer{layer}_{parts[-1]}"


def widths_text(linears: dict[str, QuantLinear], bits: int | None = None) -> str:
    """'A8W8', 'A16W8', or 'A8W8, A16W8 on 12 of 210 linears (the quantizer's choice)' for row notes."""
    wide = sum(act_grid(q, bits).bits == 16 for q in linears.values())
    if wide in (0, len(linears)):
        return "A16W8" if wide else "A8W8"
    return f"A8W8, A16W8 on {wide} of {len(linears)} linears (the quantizer's choice)"


def input_codes(x: torch.Tensor, q: QuantLinear, bits: int | None = None) -> torch.Tensor:
    """int64 [T, D] signed activation codes of x float32 [T, D], as the CPU side computes them. At 8 bits these are
    exactly the runtime's (numerics.quantize_activations: the same m = in_scale / act_scale in float32)."""
    grid = act_grid(q, bits)
    scale = torch.tensor(grid.scale, dtype=torch.float32)
    return quantize_activations(x.float(), q.in_scale, scale, grid.bits).to(torch.int64)


def output_codes(y: torch.Tensor, out_scale: float | torch.Tensor, bits: int) -> torch.Tensor:
    """int64 signed output codes of y [T, C] on a `bits`-wide output grid of step out_scale (one, or one per channel
    [C]): round half to even, clamped to uint{bits}'s range around the zero point."""
    return quantize_outputs(y.double(), out_scale, bits).to(torch.int64)


def htp_weights(q: QuantLinear) -> tuple[np.ndarray, np.ndarray]:
    """(int8 [D, C] codes, float32 [C] positive scales): the linear's weights as HTP takes them.

    Each channel's codes are multiplied by the largest power of two that keeps them in INT8 (its scale divided by
    the same): exact, and the channel then fills HTP's INT8 range. HTP's A16W8 matmul loses precision relative to
    the declared weight range (measured: a channel whose codes span [-4, 3] is off by ~15 output LSBs at 16 bits,
    one spanning [-128, 127] by 1), so a 3-bit channel must not declare an 8-bit range it does not use."""
    sign = torch.where(q.w_scale < 0, -1, 1).to(torch.int64)
    codes = q.codes.to(torch.int64) * sign[:, None]  # [C, D], each channel's scale now positive
    if int(codes.min()) < -128 or int(codes.max()) > 127:
        raise ValueError("a channel with a negative scale holds code -128: its negation does not fit HTP's INT8 "
                         "(quantize with harness.quant.numerics, which avoids it)")
    hi, lo = codes.amax(1).clamp_min(1), (-codes.amin(1)).clamp_min(1)
    # the largest shift with hi << k <= 127 and lo << k <= 128 (an all-zero channel keeps k = 7: codes stay 0)
    shift = torch.minimum(torch.floor(torch.log2(127 / hi.double())), torch.floor(torch.log2(128 / lo.double())))
    shift = shift.clamp(0, 7).to(torch.int64)
    codes = codes << shift[:, None]
    scales = q.w_scale.abs().double() / (1 << shift).double()
    return codes.t().contiguous().numpy().astype(np.int8), scales.numpy().astype(np.float32)


def layer_feeds(graph: "LayerGraph", linears: dict[str, QuantLinear], inputs: dict[str, torch.Tensor],
                bits: int | None = None) -> dict[str, np.ndarray]:
    """Graph input name -> uint8/uint16 [T, D] codes of the float inputs each linear sees (inputs: name -> [T, D])."""
    feeds = {}
    for x, names in graph.inputs.items():
        q, grid = linears[names[0]], act_grid(linears[names[0]], bits)
        codes = input_codes(inputs[names[0]], q, bits) + grid.zero_point
        feeds[x] = codes.numpy().astype(np.uint8 if grid.bits == 8 else np.uint16)
    return feeds


def layer_linears(artifact: Artifact, layer: int) -> dict[str, QuantLinear]:
    """The quantized linears of decoder layer `layer`, in the artifact's order."""
    prefix = f"model.layers.{layer}."
    found = {n: q for n, q in artifact.linears.items() if n.startswith(prefix)}
    if not found:
        raise ValueError(f"the artifact has no quantized linears in layer {layer}")
    return found


def bound_output_scale(q: QuantLinear, bits: int | None = None) -> float:
    """An output scale no input can overflow (every input code at qmax, every product adding up): for compiling
    graphs whose numerics nobody reads (compile timing); the oracle and the HTP model calibrate theirs."""
    grid = act_grid(q, bits)
    # largest |output| = qmax * s_x * max_c(sum_k |codes| * |w_scale|); over qmax output levels that is the step
    step = float((q.codes.abs().double().sum(1) * q.w_scale.abs().double()).max()) * grid.scale
    return max(step, 1e-12 / grid.qmax)


@dataclass
class LayerGraph:
    model: bytes  # the serialized ONNX model
    inputs: dict[str, list[str]]  # graph input name -> the linears that read it
    outputs: dict[str, str]  # linear name -> graph output name
    weight_bytes: int  # INT8 codes + float32 scales the graph embeds


def _share_key(q: QuantLinear) -> tuple:
    return float(q.act_scale), q.act_bits, q.in_scale.numpy().tobytes()


class QdqGraph:
    """An ONNX graph in QDQ form under construction: every tensor between operators is quantized (uint8 or uint16
    around the zero point of its ActGrid) and dequantized again before the next float operator, which is how QNN's
    HTP compiler takes quantized graphs. Names are the callers' (they key the compile cache: same names, same key)."""

    def __init__(self):
        self.nodes, self.inits, self.inputs, self.outputs = [], [], [], []
        self.weight_bytes = 0  # the INT8 codes and float32 scales the graph embeds for its matmuls

    def const(self, name: str, array: np.ndarray) -> str:
        """An initializer; a quantize and the dequantize after it share their scale and zero point by name."""
        from onnx import numpy_helper

        known = next((t for t in self.inits if t.name == name), None)
        if known is None:
            self.inits.append(numpy_helper.from_array(array, name))
        elif not np.array_equal(numpy_helper.to_array(known), array):
            raise ValueError(f"graph constant {name!r} given two different values")
        return name

    def node(self, op: str, inputs: list[str], output: str, **attrs) -> str:
        from onnx import helper

        self.nodes.append(helper.make_node(op, inputs, [output], **attrs))
        return output

    def dequantize(self, codes: str, grid: ActGrid, out: str) -> str:
        return self.node("DequantizeLinear", [codes, self.const(f"{codes}_scale", np.array(grid.scale, np.float32)),
                                              self.const(f"{codes}_zp", _zero_point(grid))], out)

    def quantize(self, x: str, grid: ActGrid, out: str) -> str:
        return self.node("QuantizeLinear", [x, self.const(f"{out}_scale", np.array(grid.scale, np.float32)),
                                            self.const(f"{out}_zp", _zero_point(grid))], out)

    def requantize(self, x: str, grid: ActGrid, out: str) -> str:
        """x float -> codes on grid -> float again: a tensor between two float operators, as QDQ graphs spell it."""
        return self.dequantize(self.quantize(x, grid, out), grid, f"{out}_f")

    def input(self, name: str, grid: ActGrid, shape: list[int]) -> str:
        """A graph input of codes on `grid`; returns its dequantized float tensor's name."""
        from onnx import helper

        self.inputs.append(helper.make_tensor_value_info(name, _elem(grid), shape))
        return self.dequantize(name, grid, f"{name}_f")

    def output(self, name: str, grid: ActGrid, shape: list[int]) -> None:
        from onnx import helper

        self.outputs.append(helper.make_tensor_value_info(name, _elem(grid), shape))

    def linear(self, i: int, name: str, q: QuantLinear, x_f: str, out_step: float | torch.Tensor, grid: ActGrid) -> str:
        """x_f float [T, D] @ the linear's INT8 weights [D, C], requantized to `grid`'s width at out_step (one step,
        or one per output channel [C], folded into the weight scales; see layer_graph). Returns the output codes."""
        c = q.codes.shape[0]
        w_codes, w_scale = htp_weights(q)
        steps = torch.as_tensor(out_step, dtype=torch.float64).expand(c)
        s_y = float(steps.max())
        w_scale = (w_scale.astype(np.float64) * (s_y / steps).numpy()).astype(np.float32)
        self.weight_bytes += w_codes.nbytes + w_scale.nbytes
        self.node("DequantizeLinear", [self.const(f"w{i}", w_codes), self.const(f"w{i}_scale", w_scale),
                                       self.const(f"w{i}_zp", np.zeros(c, np.int8))], f"w{i}_f", axis=1)
        self.node("MatMul", [x_f, f"w{i}_f"], f"y{i}_f", name=matmul_name(name))
        return self.quantize(f"y{i}_f", ActGrid(s_y, grid.bits), f"y{i}")

    def serialized(self, name: str, opset: int = OPSET) -> bytes:
        from onnx import helper

        graph = helper.make_graph(self.nodes, name, self.inputs, self.outputs, self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        model.ir_version = 10
        return model.SerializeToString()


def _elem(grid: ActGrid) -> int:
    from onnx import TensorProto

    return TensorProto.UINT8 if grid.bits == 8 else TensorProto.UINT16


def _zero_point(grid: ActGrid) -> np.ndarray:
    return np.array(grid.zero_point, np.uint8 if grid.bits == 8 else np.uint16)


def layer_graph(linears: dict[str, QuantLinear], out_scales: dict[str, float | torch.Tensor], bits: int | None,
                tokens: int) -> LayerGraph:
    """The QDQ graph of `linears` (one layer's accelerator matmuls) for `tokens`-row batches; activations at `bits`
    for every linear, or (None) at each linear's own act_bits; out_scales: linear name -> its static output step,
    one for the tensor or one per output channel [C].

    Per-channel steps ride on the weights: the graph's output grid is per tensor (s_y, the largest step) and channel
    c's weight scale is multiplied by s_y / step[c], so HTP's per-channel requantization (s_x * w[c] / s_y) lands
    each channel on its own step. With equal steps the gain is exactly 1 and the graph is the per-tensor one."""
    g = QdqGraph()
    inputs: dict[str, list[str]] = {}
    by_key: dict[tuple, str] = {}
    outputs = {}
    for i, (name, q) in enumerate(linears.items()):  # one dequantize-matmul-quantize chain per linear
        grid = act_grid(q, bits)
        key = (*_share_key(q), grid.bits)
        if key not in by_key:  # a new input quantization: a new graph input and its dequantization
            x = by_key[key] = f"x{len(by_key)}"
            inputs[x] = []
            g.input(x, grid, [tokens, q.codes.shape[1]])
        x = by_key[key]
        inputs[x].append(name)
        y = g.linear(i, name, q, f"{x}_f", out_scales[name], grid)
        g.output(y, grid, [tokens, q.codes.shape[0]])
        outputs[name] = y
    return LayerGraph(g.serialized("edgeflow_layer"), inputs, outputs, g.weight_bytes)
