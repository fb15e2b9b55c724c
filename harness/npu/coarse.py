"""llm.npu's coarse split of a decoder layer, as the two QDQ graphs its NPU runs (for npu_compile's timing).

llm.npu (mllm's Qwen/Llama NPU models) leaves to the CPU only the input norm with its quantization and attention
proper (RoPE, the KV cache, QK^T, mask, softmax, PV); the NPU runs everything else of a layer, in two subgraphs:

    qkv  x uint8 [T, D] (the CPU's normed, quantized input)
         -> q_proj, k_proj, v_proj (INT8 matmuls) -> dequantized: q [T, Cq], k [T, Ck], v [T, Cv] float32
    ffn  a uint8 [T, Cq] (attention's output, quantized by the CPU), r float32 [T, D] (the layer's input)
         -> o_proj -> + r -> RMSNorm -> quantize -> gate_proj, up_proj -> SiLU(gate) * up -> quantize
         -> down_proj -> + (r + o) -> float32 [T, D], the next layer's input

EdgeFlow's accelerator half (graph.layer_graph) is only the seven matmuls. Every tensor between two operators is
requantized (QDQ form): matmul inputs on the linear's own activation grid, everything else at 16 bits. Those 16-bit
grids and the matmuls' output steps are bounds, not calibrations: these graphs are compiled to time QNN's graph
preparation and to count the bytes it embeds, not to compute with.
"""
from __future__ import annotations

import numpy as np

from harness.artifact import Artifact
from harness.npu.graph import ActGrid, LayerGraph, QdqGraph, act_grid, bound_output_scale, layer_linears
from harness.quant.numerics import act_qmax

OPSET = 23  # RMSNormalization
ATTENTION = ("q_proj", "k_proj", "v_proj")
RESIDUAL_RANGE = 512.0  # the 16-bit grids of the float tensors span +-this (bounds for compiling, not calibrated)


def wide_grid(span: float = RESIDUAL_RANGE) -> ActGrid:
    return ActGrid(span / act_qmax(16), 16)


def coarse_graphs(artifact: Artifact, layer: int, tokens: int) -> dict[str, LayerGraph]:
    """{'qkv': ..., 'ffn': ...}: layer `layer` of `artifact` in llm.npu's split, for `tokens`-row batches."""
    linears = {name.rsplit(".", 1)[-1]: (name, q) for name, q in layer_linears(artifact, layer).items()}
    missing = {*ATTENTION, "o_proj", "gate_proj", "up_proj", "down_proj"} - linears.keys()
    if missing:
        raise ValueError(f"layer {layer} lacks the quantized linears {sorted(missing)} that llm.npu's split runs")
    return {"qkv": _qkv_graph(linears, tokens), "ffn": _ffn_graph(artifact, layer, linears, tokens)}


def _matmul(g: QdqGraph, i: int, linear: tuple, x_f: str) -> str:
    """The linear on x_f, requantized at its bound output step and dequantized: its float output's name."""
    name, q = linear
    grid, step = act_grid(q), bound_output_scale(q)
    y = g.linear(i, name, q, x_f, step, grid)
    return g.dequantize(y, ActGrid(step, grid.bits), f"{y}_dq")


def _qkv_graph(linears: dict, tokens: int) -> LayerGraph:
    g = QdqGraph()
    first = linears["q_proj"][1]
    x_f = g.input("x", act_grid(first), [tokens, first.codes.shape[1]])
    outputs = {}
    for i, key in enumerate(ATTENTION):
        name, q = linears[key]
        y = _matmul(g, i, linears[key], x_f)
        g.outputs.append(_float(y, [tokens, q.codes.shape[0]]))
        outputs[name] = y
    return LayerGraph(g.serialized("llmnpu_qkv", OPSET), {"x": [linears[k][0] for k in ATTENTION]}, outputs,
                      g.weight_bytes)


def _ffn_graph(artifact: Artifact, layer: int, linears: dict, tokens: int) -> LayerGraph:
    g, wide = QdqGraph(), wide_grid()
    o_name, o = linears["o_proj"]
    d = o.codes.shape[0]
    a_f = g.input("a", act_grid(o), [tokens, o.codes.shape[1]])
    g.inputs.append(_float("r", [tokens, d]))
    r_f = g.requantize("r", wide, "r_q")
    h_f = g.requantize(g.node("Add", [_matmul(g, 0, linears["o_proj"], a_f), r_f], "h"), wide, "h_q")
    gamma = artifact.others[f"model.layers.{layer}.post_attention_layernorm.weight"].float().numpy()
    gamma_grid = ActGrid(float(np.abs(gamma).max()) / 127 or 1.0, 8)
    gamma_f = g.dequantize(g.const("gamma", _codes(gamma, gamma_grid)), gamma_grid, "gamma_f")
    eps = float(artifact.config.get("rms_norm_eps", 1e-6))
    n = g.node("RMSNormalization", [h_f, gamma_f], "n", axis=-1, epsilon=eps)
    gate_name, gate = linears["gate_proj"]
    n_f = g.requantize(n, act_grid(gate), "n_q")
    gate_f = _matmul(g, 1, linears["gate_proj"], n_f)
    sig_f = g.requantize(g.node("Sigmoid", [gate_f], "sig"), wide, "sig_q")
    silu = g.requantize(g.node("Mul", [gate_f, sig_f], "silu"), wide, "silu_q")  # SiLU(x) = x * sigmoid(x)
    up_f = _matmul(g, 2, linears["up_proj"], n_f)
    down_name, down = linears["down_proj"]
    m_f = g.requantize(g.node("Mul", [silu, up_f], "m"), act_grid(down), "m_q")
    out = g.quantize(g.node("Add", [_matmul(g, 3, linears["down_proj"], m_f), h_f], "out_f"), wide, "out_q")
    y = g.dequantize(out, wide, "out")
    g.outputs.append(_float(y, [tokens, d]))
    return LayerGraph(g.serialized("llmnpu_ffn", OPSET), {"a": [o_name], "r": []}, {down_name: y}, g.weight_bytes)


def _codes(x: np.ndarray, grid: ActGrid) -> np.ndarray:
    """uint8 codes of a constant (the norm's weight) on an 8-bit grid around its zero point."""
    return (np.clip(np.rint(x / grid.scale), -grid.qmax, grid.qmax) + grid.zero_point).astype(np.uint8)


def _float(name: str, shape: list[int]):
    """A float32 graph input or output: the CPU's side of the split hands over and takes floats."""
    from onnx import TensorProto, helper

    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)
