"""The experiment kinds that put QNN's HTP in the loop (harness/npu/):

  npu_compile  graph preparation with the real compiler (Figure 1's question): each decoder layer's accelerator half
               compiled by QNN for the npu group's SoC, and the whole model as one graph (llm.npu's way), against
               loading the materialized context binaries; the bytes QNN embeds beside the weights' bytes
  npu_oracle   the HTP simulator's outputs against the fake-quant reference and the runtime's accelerator lane, per
               layer, in LSBs of the output grid
  npu_profile  each layer's context binary run on a phone's NPU by the user's QAIRT SDK (qnn-net-run, profiled):
               measured NPU time per layer and per pipeline stage
"""
from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from harness.models.zoo import load_model
from harness.systems.base import NotRun

CALIBRATION_TOKENS = 256  # one calibration window gives each linear's static output range


def _artifact(job, tokenizer=None):
    """(artifact, npu) after the checks every npu kind needs; the artifact is quantized once and cached."""
    from harness.artifact import load_artifact
    from harness.npu.config import npu_of
    from harness.npu.htp import require_htp
    from harness.quant.cache import quantized_artifact

    if job.cfg.get("quantizer") is None:
        raise ValueError(f"experiment={job.experiment.name} compiles a quantizer's accelerator half: "
                         "add quantizer=<option>")
    require_htp()
    artifact = load_artifact(quantized_artifact(job.model, job.cfg.quantizer, tokenizer))
    weight_only = [n for n, q in artifact.linears.items() if q.act_scale is None]
    if weight_only:
        raise NotRun(f"{len(weight_only)} linears are weight-only (e.g. {weight_only[0]}): HTP runs W8A8 and W8A16 "
                     "matmuls, not float activations")
    return artifact, npu_of(job.cfg)


def where(npu) -> str:
    from harness.npu.htp import versions

    return f"QNN HTP {npu.htp_arch} ({npu.chipset}, soc_model {npu.soc_model}), {versions()}"


def npu_compile(job) -> Iterator[dict]:
    """Rows per layer (columns soc, npu_split, layer) and for the model (layer null; variant "all layers": the
    per-layer sums, "one graph": every layer's matmuls in one graph): qnn_compile_s (QDQ ONNX -> HTP context by QNN's
    compiler, always compiled afresh), qnn_load_s (a session on the written context binary), qnn_context_mb and
    qnn_weights_mb. Measured on this host with QNN's x86 compiler (a phone compiles on the phone, slower).

    experiment.extra.split=llmnpu: llm.npu's coarse split of the same linears instead (harness/npu/coarse.py, two
    graphs per layer, their times and bytes summed per layer; npu_split "llmnpu"); llm.npu has no one-graph form
    (its CPU half sits between the graphs)."""
    from harness.npu.coarse import coarse_graphs
    from harness.npu.compile import STEM
    from harness.npu.graph import bound_output_scale, layer_graph, layer_linears, widths_text
    from harness.npu.htp import compile_context, context_binary, open_session

    artifact, npu = _artifact(job)  # no FP model in memory: a paper-shaped one is GBs
    bits, tokens = npu.activation_bits, npu.chunk_tokens
    coarse = job.settings.split == "llmnpu"
    what = ("llm.npu's coarse split (qkv and o-to-ffn graphs: norms, SiLU, residual adds on the NPU; 16-bit grids "
            "between operators)" if coarse else "EdgeFlow's split (the seven matmuls of a layer)")
    notes = (f"{where(npu)}; {what}; {widths_text(artifact.linears, None if coarse else bits)}, {tokens}-token "
             "graphs; output scales bounded, not calibrated (timing only); measured on this host")
    n_layers = int(artifact.config["num_hidden_layers"])
    where_ = {"soc": npu.name, "npu_split": job.settings.split}  # every row's columns

    def matmuls(linears: dict):  # EdgeFlow's accelerator graph of these linears
        return layer_graph(linears, {n: bound_output_scale(q, bits) for n, q in linears.items()}, bits, tokens)

    def graphs(layer: int) -> list:
        if coarse:
            return list(coarse_graphs(artifact, layer, tokens).values())
        return [matmuls(layer_linears(artifact, layer))]

    def measure(parts: list, folder: Path, **columns) -> Iterator[dict]:
        values = {"qnn_compile_s": [0.0, "s"], "qnn_load_s": [0.0, "s"], "qnn_context_mb": [0.0, "MB"],
                  "qnn_weights_mb": [0.0, "MB"]}
        for i, graph in enumerate(parts):
            wrapper, compile_s = compile_context(graph.model, npu, folder / str(i), STEM)
            t0 = time.perf_counter()
            open_session(wrapper, npu)
            for metric, value in (("qnn_load_s", time.perf_counter() - t0), ("qnn_compile_s", compile_s),
                                  ("qnn_context_mb", context_binary(wrapper).stat().st_size / 1e6),
                                  ("qnn_weights_mb", graph.weight_bytes / 1e6)):
                values[metric][0] += value
        for metric, (value, unit) in values.items():
            yield job.row(metric, value, unit, notes=notes, **where_, **columns)

    totals: dict[str, list] = {}
    with tempfile.TemporaryDirectory(prefix="qnn-compile-") as tmp:
        for layer in range(n_layers):
            for row in measure(graphs(layer), Path(tmp) / str(layer), layer=layer):
                totals.setdefault(row["metric"], [0.0, row["unit"]])[0] += row["value"]
                yield row
            print(f"[edgeflow-bench] npu_compile: layer {layer + 1}/{n_layers} compiled", file=sys.stderr, flush=True)
    for metric, (value, unit) in totals.items():
        yield job.row(metric, value, unit, variant="all layers", notes=f"sum over layers; {notes}", **where_)
    if not coarse:
        with tempfile.TemporaryDirectory(prefix="qnn-compile-") as tmp:
            yield from measure([matmuls(dict(artifact.linears))], Path(tmp), variant="one graph")


def npu_oracle(job) -> Iterator[dict]:
    """experiment.extra: oracle_layers (default all), the decoder layers to compare.

    Per layer (columns soc, npu_split, layer): htp_lsb_max / htp_lsb_share (HTP simulator vs the fake-quant reference) and
    htp_lsb_max_runtime / htp_lsb_share_runtime (vs the runtime's lane) over its 8-bit linears, htp_lsb_max_a16 /
    htp_lsb_share_a16 over its 16-bit ones (in 16-bit LSBs), labelled simulated, with the mean signed difference in
    the notes. Inputs: one npu.chunk_tokens batch of the held-out perplexity split; output ranges from
    one calibration window. Context binaries are compiled once and cached (harness/npu/compile.py)."""
    from harness.npu.graph import widths_text
    from harness.quant.outputs import numerics_text
    from harness.npu.oracle import layer_agreement
    from harness.quant.fakequant import build_fakequant_model

    model, tokenizer = load_model(job.model)
    artifact, npu = _artifact(job, tokenizer)
    fq_model = build_fakequant_model(artifact, model)
    calibration, test = _oracle_tokens(tokenizer, npu)
    layers = job.settings.oracle_layers
    sim = (f"HTP simulator on this host, {where(npu)}; {widths_text(artifact.linears, npu.activation_bits)}, "
           f"{len(test)} tokens of held-out text, {numerics_text(artifact.manifest)}")
    for r in layer_agreement(artifact, fq_model, calibration, test, npu, layers=None if layers is None else list(layers)):
        for bits, width in ((8, ""), (16, "_a16")):  # LSBs of 8- and 16-bit outputs are different units
            for suffix, which in (("", "vs_reference"), ("_runtime", "vs_runtime")):
                worst = r.worst(which, bits)
                if worst is None:
                    continue  # no linear of this width in the layer
                other = "the fake-quant reference" if which == "vs_reference" else "the runtime's accelerator lane"
                notes = (f"HTP vs {other}, {bits}-bit output codes; mean signed {worst.mean_signed:+.4f} LSB; {sim}")
                for metric, value, unit in ((f"htp_lsb_max{width}{suffix}", worst.max_lsb, f"LSB{bits}"),
                                            (f"htp_lsb_share{width}{suffix}", worst.share_differ, "fraction")):
                    yield job.row(metric, value, unit, soc=npu.name, npu_split="edgeflow", layer=r.layer,
                                  label="simulated", notes=notes)


def calibration_window(tokenizer):
    """The token ids [CALIBRATION_TOKENS] from which every HTP graph takes its static output scales."""
    from harness.data.streams import calibration_tokens

    return calibration_tokens(tokenizer, n_samples=1, seq_len=CALIBRATION_TOKENS, seed=0)[0]


def _oracle_tokens(tokenizer, npu) -> tuple:
    """(calibration ids, test ids): the calibration window for the output scales, one npu.chunk_tokens batch of the
    held-out perplexity split as the graphs' input."""
    from harness.data.streams import local_ppl_tokens

    return calibration_window(tokenizer), local_ppl_tokens(tokenizer).ids[: npu.chunk_tokens]


def _prepared_layers(artifact, model, tokenizer, npu):
    """Every decoder layer's compiled graph and feeds on the oracle's tokens (harness.npu.oracle.prepared_layers)."""
    from harness.npu.oracle import prepared_layers
    from harness.quant.fakequant import build_fakequant_model

    return prepared_layers(artifact, build_fakequant_model(artifact, model), *_oracle_tokens(tokenizer, npu), npu)


STAGE_OF = {"q_proj": "qkv", "k_proj": "qkv", "v_proj": "qkv", "o_proj": "o_proj", "gate_proj": "gate_up",
            "up_proj": "gate_up", "down_proj": "down"}  # harness/pipeline_sim.py's matmul stages


def npu_profile(job) -> Iterator[dict]:
    """experiment.extra: inferences (default 3) per layer. Needs device=android and npu.qairt_root (else 'not run').

    Per layer (columns soc, npu_split, layer): npu_execute_ms, QNN's accelerator execute time of the layer's graph
    for one npu.chunk_tokens batch (mean over the inferences), and npu_stage_ms per matmul stage of the pipeline
    simulator (column stage: the execute time split by the stage's share of the operator cycles). Measured on the
    phone."""
    from harness.devices import get_device
    from harness.devices.lock import hold_device
    from harness.npu.graph import matmul_name
    from harness.npu.phone import PhoneProfiler

    model, tokenizer = load_model(job.model)
    artifact, npu = _artifact(job, tokenizer)
    with hold_device(job.cfg):
        device = get_device(job.cfg.device)
        profiler = PhoneProfiler(device, npu, job.settings.inferences)
        notes = (f"qnn-net-run --profiling_level detailed on the phone's NPU, {where(npu)}, QAIRT SDK "
                 f"{profiler.sdk}; {npu.chunk_tokens}-token batch of held-out text")
        for layer in _prepared_layers(artifact, model, tokenizer, npu):
            p = profiler.profile(f"layer{layer.layer}", layer.compiled, layer.feeds)
            columns = {"soc": npu.name, "npu_split": "edgeflow", "layer": layer.layer}
            yield job.row("npu_execute_ms", p.execute_us / 1e3, "ms", notes=notes, **columns)
            cycles = {stage: 0 for stage in dict.fromkeys(STAGE_OF.values())}
            for name in layer.linears:
                cycles[STAGE_OF[name.rsplit(".", 1)[-1]]] += sum(
                    c for op, c in p.op_cycles.items() if op.startswith(matmul_name(name)))
            total = sum(p.op_cycles.values())
            for stage, c in cycles.items():
                value = p.execute_us / 1e3 * c / total if total else None
                yield job.row("npu_stage_ms", value, "ms", stage=stage, notes=notes, **columns,
                              **({} if total else {"status": "not run", "label": "not run",
                                                   "error": "the profile has no per-operator cycles"}))
