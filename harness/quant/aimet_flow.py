"""Qualcomm AIMET's post-training flow on the whole model, read back as our per-linear grids (quantizer `aimet`).

What an engineer shipping an LLM to a Hexagon NPU runs (aimet-onnx, installed by `make setup`):

    decoder as ONNX         token ids int64 [1, T] -> final hidden states float32 [1, T, H] (torch's exporter;
                            the LM head stays ours: the artifact stores it per-row INT8 like every quantizer's)
    QuantizationSimModel    AIMET's HTP configuration for the SoC (htp_v79 for SM8750: per-output-channel
                            symmetric weights, asymmetric per-tensor activations on every op output)
    weight method           sequential MSE (each linear's per-channel scale chosen among candidates by its output
                            MSE) or AdaRound (each weight's rounding direction learned), on the first windows
    compute_encodings       the activation ranges, on every calibration window

and then, for each of our linears (ONNX MatMul [D, C] whose weight equals the linear's weight [C, D] transposed):

    weights   AIMET's encoding per output channel c: step delta[c] with offset -2^(b-1), i.e. w ~ delta[c] * q with
              q = round(w / delta[c]) in [-2^(b-1), 2^(b-1) - 1] (numerics.quantize_rows; AdaRound leaves w on the
              grid already)
    inputs    AIMET's range [min, max] of the tensor the MatMul reads (found through data-movement ops, whose
              outputs AIMET leaves unquantized) -> our static symmetric grid over max(|min|, |max|): the runtime and
              our HTP graphs take a zero point of 2^(b-1), AIMET's asymmetric zero point does not carry over.

Everything else AIMET quantizes (norm outputs, attention, SiLU) stays in float on our side, as in EdgeFlow's
placement, where only the matmuls go to the NPU: both methods are compared on the same accelerator half.
"""
from __future__ import annotations

import hashlib
import logging
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from harness.artifact import QuantLinear
from harness.quant.calibrate import target_linears
from harness.quant.numerics import act_qmax, quantize_rows

WEIGHT_METHODS = ("seq_mse", "adaround", "minmax")  # minmax: AIMET's calibrated ranges, nearest rounding
# ops AIMET's HTP config leaves unquantized because they only move data: a MatMul behind one reads its producer's grid
DATA_MOVEMENT = {"Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Expand", "Identity"}


def unavailable_reason() -> str:
    """Why AIMET cannot run here ("" when aimet-onnx imports)."""
    try:
        import aimet_onnx.quantsim  # noqa: F401
    except Exception as e:  # an ImportError, or a broken dependency chain (e.g. a CUDA torchvision)
        return (f"aimet-onnx is not importable ({type(e).__name__}: {e}); `make setup` installs it "
                "(--no-deps, its requirements under torch==2.13.0)")
    return ""


@dataclass(frozen=True)
class AimetRecipe:
    """What the flow runs: the widths, AIMET's config name and the weight method with its effort."""

    weight_bits: int  # 4 or 8: AIMET's param_type int4 / int8
    act_bits: int  # 8 or 16: activation_type int8 / int16
    config_file: str  # an AIMET config alias, htp_<arch>
    weight_method: str  # one of WEIGHT_METHODS
    optimize_windows: int  # calibration windows the weight method sees (all of them calibrate the ranges)
    seq_mse_candidates: int = 20
    adaround_iterations: int = 1000


def run_aimet(model: nn.Module, calibration: list[torch.Tensor], recipe: AimetRecipe) -> dict[str, QuantLinear]:
    """AIMET's flow on `model` (a Llama for causal LM, float32) and its calibration windows (1-D token tensors):
    one QuantLinear per target linear, by module name."""
    from aimet_onnx.quantsim import QuantizationSimModel

    if reason := unavailable_reason():
        raise RuntimeError(reason)
    _quiet_logs()
    inputs = [{"input_ids": seq[None].numpy().astype(np.int64)} for seq in calibration]
    with tempfile.TemporaryDirectory(prefix="aimet-") as tmp:
        onnx_model = export_decoder(model, inputs[0]["input_ids"], Path(tmp) / "decoder.onnx")
        sites = linear_sites(onnx_model, target_linears(model))
        sim = QuantizationSimModel(onnx_model, param_type=f"int{recipe.weight_bits}",
                                   activation_type=f"int{recipe.act_bits}", config_file=recipe.config_file,
                                   providers=["CPUExecutionProvider"])
        _optimize_weights(sim, inputs[: recipe.optimize_windows], recipe)
        sim.compute_encodings(inputs)
        weights = {i.name: i for i in sim.model.model.graph.initializer}
        return {name: _read_back(sim, weights, site, recipe) for name, site in sites.items()}


def _quiet_logs() -> None:
    """AIMET and the ONNX exporter log every pass and layer at INFO (and the exporter warns that torchvision, which
    we never install, is absent): keep AIMET's warnings and the exporter's errors."""
    from aimet_onnx.common.utils import AimetLogger

    AimetLogger.set_level_for_all_areas(logging.WARNING)
    for name in ("onnx_ir", "onnxscript", "torch.onnx"):
        logging.getLogger(name).setLevel(logging.ERROR)


def export_decoder(model: nn.Module, example_ids: np.ndarray, path: Path):
    """The decoder (embeddings to final norm, no LM head) as an ONNX ModelProto with its weights loaded, float32."""
    import onnx

    class Decoder(nn.Module):
        def __init__(self, body):
            super().__init__()
            self.body = body

        def forward(self, input_ids):
            return self.body(input_ids=input_ids, use_cache=False).last_hidden_state

    body = getattr(model, "model", model)
    implementation = model.config._attn_implementation
    model.set_attn_implementation("eager")  # the exporter traces plain matmuls and softmax
    try:
        with torch.no_grad():
            torch.onnx.export(Decoder(body).eval(), (torch.from_numpy(example_ids),), str(path),
                              input_names=["input_ids"], output_names=["hidden"], dynamo=True,
                              external_data=True, verbose=False)
    finally:
        model.set_attn_implementation(implementation)
    return onnx.load(str(path))


@dataclass(frozen=True)
class LinearSite:
    """Where a linear lives in the ONNX graph: its MatMul's weight initializer [D, C] and the activation tensor
    whose AIMET quantizer sets the MatMul's input grid."""

    weight: str
    activation: str


def linear_sites(onnx_model, linears: dict[str, nn.Linear]) -> dict[str, LinearSite]:
    """Each target linear's site, matched by weight content (the exporter renames initializers)."""
    from onnx import numpy_helper

    by_content = {_digest(m.weight.detach().float().T.contiguous().numpy()): n for n, m in linears.items()}
    initializers = {i.name: i for i in onnx_model.graph.initializer}
    producers = {out: node for node in onnx_model.graph.node for out in node.output}
    sites = {}
    for node in onnx_model.graph.node:
        if node.op_type != "MatMul" or node.input[1] not in initializers:
            continue
        name = by_content.get(_digest(numpy_helper.to_array(initializers[node.input[1]])))
        if name is not None:
            sites[name] = LinearSite(node.input[1], _quantized_source(node.input[0], producers))
    missing = sorted(set(linears) - set(sites))
    if missing:
        raise RuntimeError(f"AIMET flow: {len(missing)} linears have no MatMul with their weights in the exported "
                           f"graph (first: {missing[0]}); the exporter changed the weights' layout")
    return sites


def _digest(array: np.ndarray) -> tuple:
    return array.shape, hashlib.sha256(np.ascontiguousarray(array, dtype=np.float32).tobytes()).hexdigest()


def _quantized_source(tensor: str, producers: dict) -> str:
    """The tensor whose grid a MatMul input carries: itself, or the input of the data-movement ops before it."""
    while tensor in producers and producers[tensor].op_type in DATA_MOVEMENT:
        tensor = producers[tensor].input[0]
    return tensor


def _optimize_weights(sim, inputs: list[dict], recipe: AimetRecipe) -> None:
    if recipe.weight_method == "seq_mse":
        from aimet_onnx.sequential_mse.seq_mse import apply_seq_mse

        apply_seq_mse(sim, inputs, num_candidates=recipe.seq_mse_candidates)
    elif recipe.weight_method == "adaround":
        from aimet_onnx.adaround.adaround_weight import Adaround

        Adaround.apply_adaround(sim, inputs, num_iterations=recipe.adaround_iterations)


def _read_back(sim, weights: dict, site: LinearSite, recipe: AimetRecipe) -> QuantLinear:
    from onnx import numpy_helper

    w = torch.from_numpy(numpy_helper.to_array(weights[site.weight]).copy()).float().T  # [C, D]
    enc = sim.qc_quantize_op_dict[site.weight].get_encodings()  # one TfEncoding per output channel
    if len(enc) != w.shape[0]:
        raise RuntimeError(f"AIMET flow: {site.weight} has {len(enc)} weight encodings for {w.shape[0]} channels "
                           "(expected per-output-channel weights from the HTP config)")
    scale = torch.tensor([e.delta for e in enc], dtype=torch.float32)  # [C]: AIMET's step, positive
    offset = torch.tensor([e.offset for e in enc], dtype=torch.float64)
    lo = -(1 << (recipe.weight_bits - 1))
    if not bool((offset == lo).all()):
        raise RuntimeError(f"AIMET flow: {site.weight} has asymmetric weight encodings (offsets {offset.unique()})")
    bits = torch.full((w.shape[0],), recipe.weight_bits, dtype=torch.uint8)
    codes = quantize_rows(w, bits, scale)  # nearest level; AdaRound's weights already lie on one
    act = sim.qc_quantize_op_dict.get(site.activation)
    if act is None or not act.enabled or act.get_encodings() is None:
        raise RuntimeError(f"AIMET flow: the input {site.activation!r} of {site.weight} has no activation encoding")
    (a,) = act.get_encodings()
    peak = max(abs(a.min), abs(a.max), 1e-8)
    return QuantLinear(codes=codes, bits=bits, w_scale=scale, in_scale=torch.ones(w.shape[1]),
                       act_scale=torch.tensor(peak / act_qmax(recipe.act_bits), dtype=torch.float32),
                       act_bits=recipe.act_bits)
