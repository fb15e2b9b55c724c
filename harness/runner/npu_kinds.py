"""The experiment kind that puts QNN's HTP in the loop (harness/npu/):

  npu_oracle  the quantizer's accelerator half compiled per decoder layer by QNN for the npu group's SoC, then the
              HTP simulator's outputs against the fake-quant reference and the runtime's accelerator lane
"""
from __future__ import annotations

from collections.abc import Iterator

from harness.systems.base import NotRun

CALIBRATION_TOKENS = 256  # one calibration window gives each linear's static output range


def npu_oracle(job) -> Iterator[dict]:
    """experiment.extra: oracle_layers (default all), the decoder layers to compile and compare.

    Per layer (variant '<soc> layer i'): qnn_compile_s, qnn_load_s, qnn_context_mb and qnn_weights_mb (measured on
    this host: QNN's HTP compiler and its context loader); htp_lsb_max / htp_lsb_share (HTP simulator vs fake-quant
    reference) and htp_lsb_max_runtime / htp_lsb_share_runtime (vs the runtime's lane), labelled simulated. Inputs:
    one npu.chunk_tokens batch of the held-out perplexity split; output ranges from one calibration window."""
    from harness.artifact import load_artifact
    from harness.data.streams import calibration_tokens, local_ppl_tokens
    from harness.npu.config import npu_of
    from harness.npu.htp import require_htp, versions
    from harness.npu.oracle import layer_agreement
    from harness.quant.cache import quantized_artifact
    from harness.quant.fakequant import build_fakequant_model
    from harness.runner.kinds import _fp_model

    if job.cfg.get("quantizer") is None:
        raise ValueError("experiment=npu_oracle compiles a quantizer's accelerator half: add quantizer=<option>")
    require_htp()
    npu = npu_of(job.cfg)
    model, tokenizer = _fp_model(job)
    artifact = load_artifact(quantized_artifact(job.model, job.cfg.quantizer, tokenizer))
    weight_only = [n for n, q in artifact.linears.items() if q.act_scale is None]
    if weight_only:
        raise NotRun(f"{len(weight_only)} linears are weight-only (e.g. {weight_only[0]}): HTP runs W8A8 and W8A16 "
                     "matmuls, not float activations")
    fq_model = build_fakequant_model(artifact, model)
    calibration = calibration_tokens(tokenizer, n_samples=1, seq_len=CALIBRATION_TOKENS, seed=0)[0]
    test = local_ppl_tokens(tokenizer).ids[: npu.chunk_tokens]
    layers = job.experiment.extra.get("oracle_layers")
    where = f"QNN HTP {npu.htp_arch} ({npu.chipset}, soc_model {npu.soc_model}), {versions()}"
    sim = f"HTP simulator on this host, {where}; A{npu.activation_bits}W8, {len(test)} tokens of held-out text"
    totals = {"qnn_compile_s": 0.0, "qnn_load_s": 0.0, "qnn_context_mb": 0.0, "qnn_weights_mb": 0.0}
    for r in layer_agreement(artifact, fq_model, calibration, test, npu, layers=None if layers is None else list(layers)):
        variant = f"{npu.name} layer {r.layer}"
        made = "found in the cache (compiled earlier)" if r.compiled.cached else "compiled now"
        sizes = {"qnn_compile_s": (r.compiled.compile_s, "s", f"QDQ ONNX -> HTP context by QNN's compiler, {made}"),
                 "qnn_load_s": (r.compiled.load_s(npu), "s", "session on the materialized context binary"),
                 "qnn_context_mb": (r.compiled.context_bytes / 1e6, "MB", "QNN context binary (graph + weights)"),
                 "qnn_weights_mb": (r.compiled.weight_bytes / 1e6, "MB", "INT8 codes + float32 scales it holds")}
        for metric, (value, unit, what) in sizes.items():
            totals[metric] += value
            yield job.row(metric, value, unit, variant=variant, notes=f"{what}; {where}; measured on this host")
        for suffix, which in (("", "vs_reference"), ("_runtime", "vs_runtime")):
            if not getattr(r, which):
                continue
            worst = r.worst(which)
            other = "the fake-quant reference" if which == "vs_reference" else "the runtime's accelerator lane"
            notes = f"HTP vs {other}, output codes; mean signed {worst.mean_signed:+.4f} LSB; {sim}"
            yield job.row(f"htp_lsb_max{suffix}", worst.max_lsb, "LSB", variant=variant, label="simulated",
                          notes=notes)
            yield job.row(f"htp_lsb_share{suffix}", worst.share_differ, "fraction", variant=variant,
                          label="simulated", notes=notes)
    for metric, value in totals.items():
        yield job.row(metric, value, "s" if metric.endswith("_s") else "MB", variant=f"{npu.name} all layers",
                      notes=f"sum over the layers compared; {where}; measured on this host")
