"""What each `experiment.kind` measures, registered once in KINDS as a Kind: the generator taking a Job and
yielding rows (`job.row(...)`), its settings class, and whether it is timed or evaluates in this process.

  smoke       convert the model (once), FP16 perplexity on the local split and accuracy on one local task
  perplexity  perplexity of the FP model or of its fake-quant model (quantizer=...), GPTQ/AWQ protocol
  accuracy    lm-eval accuracy of the FP or fake-quant model on a dataset (a local proxy when the hub is away)
  ttft        cold-start TTFT of one system on one device (harness/measure/ttft.py), the device held exclusively
  fidelity    a quantizer's artifact against the FP model: mean KL and top-1 agreement on held-out text, effective
              bits per weight, artifact and packed file size, calibration and quantization time
  pipeline_sim  every scheduling policy replayed (harness/pipeline_sim.py) over the runtime's measured operator
              costs, the accelerator at phone-like NPU/CPU ratios (one the paper's, one assumed: pipeline_sim
              SIM_INPUTS): latency and bubble rates (labelled simulated)
  npu_compile / npu_oracle / npu_profile  the accelerator half compiled by QNN for a Qualcomm SoC: graph preparation
              times and bytes; HTP's numerics against ours; its time on a phone's NPU (harness/runner/npu_kinds.py)
"""
from __future__ import annotations

import time
from dataclasses import dataclass, fields
from typing import Callable, Iterator

from harness.config import build
from harness.models.zoo import load_model
from harness.runner.npu_kinds import npu_compile, npu_oracle, npu_profile
from harness.runner.settings import (AccuracySettings, FidelitySettings, NpuCompileSettings, NpuOracleSettings,
                                     NpuProfileSettings, PerplexitySettings, PipelineSimSettings, TtftSettings)
from harness.runner.store import RUNTIME_EVALUATED
from harness.systems.base import NotRun  # the runner records it as a 'not run' row

# Online datasets whose offline stand-in is a local proxy task (harness/data/tasks.py).
LOCAL_PROXY = {"lambada": "lambada-local", "hellaswag": "hellaswag-local"}


def _needs_trained_weights(job, what: str) -> None:
    if job.model.source == "random":
        raise NotRun(f"{job.model.name} has random weights (a paper shape for timing): its {what} would mean nothing")


def smoke(job) -> Iterator[dict]:
    from harness.data.config import load_dataset_config

    model, tokenizer = load_model(job.model)
    yield job.row("parameters", sum(p.numel() for p in model.parameters()), "count", notes=job.model.note)
    yield from _perplexity_rows(job, model, tokenizer, quantizer="fp16")
    yield from _accuracy_rows(job, model, tokenizer, load_dataset_config("lambada-local"), quantizer="fp16")


def perplexity(job) -> Iterator[dict]:
    _needs_trained_weights(job, "perplexity")
    fp, tokenizer = load_model(job.model)
    model, tokenizer, fields = _model_under_test(job, (fp, tokenizer))
    yield from _perplexity_rows(job, model, tokenizer, reference=None if model is fp else fp, **fields)


def accuracy(job) -> Iterator[dict]:
    from harness.config import build
    from harness.data.config import DatasetConfig, load_dataset_config
    from harness.data.hub import hub_status

    _needs_trained_weights(job, "accuracy")
    if job.cfg.get("dataset") is None:
        raise ValueError("experiment=accuracy needs a dataset (dataset=lambada-local, dataset=hellaswag, ...)")
    dataset = build(DatasetConfig, job.cfg.dataset, "dataset")
    requested = dataset.name  # rows keep the dataset asked for; a proxy says so in its label and notes
    # With the hub unreachable, fall back to the local proxy; an explicit HF_*_OFFLINE=1 means "use my local copy of
    # the real dataset", which lm-eval then reads from the Hugging Face cache.
    reason = hub_status() if dataset.lm_eval_task else ""
    if reason and not reason.startswith("HF_"):
        if dataset.name not in LOCAL_PROXY:
            raise NotRun(f"{dataset.name} needs lm-eval's {dataset.lm_eval_task} from the Hugging Face hub "
                              f"({reason}) and has no local proxy task")
        dataset = load_dataset_config(LOCAL_PROXY[dataset.name])
    system = job.cfg.system.name if job.cfg.get("system") is not None else None
    runtime_evaluated = job.settings.evaluator == "runtime" and job.cfg.get("npu") is None
    if system is None and runtime_evaluated and job.cfg.get("quantizer") is not None:
        yield from _runtime_evaluated_accuracy(job, dataset, requested)
    elif system is None:  # the FP16 model, or the fake-quant model of `quantizer` (a stand-in when drawn for an engine)
        model, tokenizer, fields = _model_under_test(job)
        # HTP-computed linears take lm-eval's own HFLM, one request at a time as their graphs were compiled
        lm = None if job.cfg.get("npu") is not None else _torch_lm(job, model, tokenizer)
        yield from _accuracy_rows(job, model, tokenizer, dataset, row_dataset=requested, lm=lm, **fields)
    else:
        yield from _engine_accuracy(job, dataset, requested)


def _engine_accuracy(job, dataset, requested: str) -> Iterator[dict]:
    """An engine's accuracy from its own forward pass (System.open_scorer) over the weights its TTFT loads, EdgeFlow's
    included (its runtime over the packed file); where the system has a reference model (EdgeFlow: the fake-quant
    model of its artifact) the first requests are also scored by it and agreement rows say how close the two were."""
    from harness.systems import SYSTEMS

    own = SYSTEMS.lookup(job.cfg.system.name).own_quantizer
    if own is not None and job.cfg.get("quantizer") is None:  # its budget is the quantizer's: say which
        raise ValueError(f"{job.cfg.system.name}'s accuracy needs its quantizer group: add quantizer={own}")
    system, prepared, bits = _prepared_system(job)
    fp, tokenizer = load_model(job.model)
    reference = system.reference_model(prepared, fp)
    numerics = {k: v for k, v in prepared.columns.items() if k == "numerics"}  # what computed a quality number
    with system.open_scorer(prepared, ctx=job.settings.max_length) as scorer:
        yield from _scored_rows(job, scorer, reference, tokenizer, dataset, requested,
                                scored_by=_scored_by(system, prepared), bits=bits, **numerics)


def _log_sharing(lm) -> None:
    import logging

    st = lm.stats
    logging.getLogger(__name__).info(
        "scored %d requests: %d in %d groups whose context ran once (%d context tokens not run again), %d alone",
        st.shared + st.alone, st.shared, st.groups, st.context_tokens_saved, st.alone)


def _prepared_system(job):
    """(system, prepared, bits): the job's system prepared as its TTFT prepares it (experiment.extra.bits, default 8),
    so a baseline's accuracy and fidelity are computed on the weights its TTFT loads."""
    from harness.devices import get_device
    from harness.systems import get_system

    system = get_system(job.cfg.system)
    system.configure(job.cfg)
    bits = system.weight_bits(job.settings.bits)
    return system, system.prepare(job.model, bits, get_device(job.cfg.device)), float(bits)


def _scored_by(system, prepared) -> str:
    from pathlib import Path

    # prepared.notes say how the engine ran (llama.cpp: its probed kernel path), as the TTFT rows of these weights do
    return "; ".join([f"{system.name}'s own forward pass over {prepared.weight_format} ({Path(prepared.files[0]).name})",
                      *prepared.notes])


def _runtime_evaluated_accuracy(job, dataset, requested: str) -> Iterator[dict]:
    """A quantizer's accuracy (no system named) scored by our runtime's INT8 forward pass over its artifact
    (experiment.extra.evaluator=runtime), or by the fake-quant model where the runtime cannot run the method; the
    rows' notes say which, and the runtime's carry variant RUNTIME_EVALUATED."""
    from harness.engine.capi import NativeEngine, gemm_kernel
    from harness.quant.fakequant import build_fakequant_model
    from harness.quant.outputs import numerics_column, numerics_text

    fp, tokenizer = load_model(job.model)
    artifact = _job_artifact(job, tokenizer)
    reference = build_fakequant_model(artifact, fp)
    if artifact.manifest.get("runtime_compatible") is False:
        why = artifact.manifest.get("runtime_incompatible_reason", "no reason given")
        lm = _torch_lm(job, reference, tokenizer)
        yield from _accuracy_rows(job, reference, tokenizer, dataset, row_dataset=requested, lm=lm,
                                  scored_by=f"{FAKE_QUANT} (our runtime cannot run this method: {why})",
                                  label="stand-in", numerics=numerics_column(artifact.manifest))
        return
    threads = _engine_threads(job)
    with NativeEngine.from_artifact(artifact, threads=threads, ctx=job.settings.max_length) as engine:
        yield from _scored_rows(job, engine, reference, tokenizer, dataset, requested,
                                scored_by=f"our runtime's INT8 forward pass over the artifact ("
                                          f"{gemm_kernel()} GEMM, {threads} thread{'s' * (threads != 1)}; "
                                          f"{numerics_text(artifact.manifest)})",
                                variant=RUNTIME_EVALUATED, numerics=numerics_column(artifact.manifest))


def _engine_threads(job) -> int:
    """Our runtime's thread budget in a job: its system's (conf/system/edgeflow.yaml threads), or without a system
    group the job's share of the cores in a local pool (engine/run.py pool_share_threads)."""
    from harness.engine.run import pool_share_threads

    return int(job.cfg.system.threads) if job.cfg.get("system") is not None else pool_share_threads()


def _torch_lm(job, model, tokenizer):
    """lm-eval's requests scored by a torch model with each context run once (HFLM's log-likelihoods, within float
    rounding: tests/eval/test_scorer_lm.py)."""
    from harness.eval.scorer_lm import ScoredLM, torch_logprobs, torch_logprobs_after

    return ScoredLM(torch_logprobs(model), tokenizer, job.settings.max_length, shared=torch_logprobs_after(model))


def _scored_rows(job, scorer, reference, tokenizer, dataset, requested: str, scored_by: str,
                 **fields) -> Iterator[dict]:
    """Accuracy rows of an engine's scorer (System.open_scorer, or our runtime's NativeEngine), a context shared by
    several requests run once where the engine can keep it; with a torch `reference`, each request of the first
    agreement_items items also scored by it, and rows of how close the two were."""
    from harness.eval.scorer_lm import ScoredLM, torch_logprobs, torch_logprobs_after

    checked = {} if reference is None else dict(
        reference=torch_logprobs(reference), reference_shared=torch_logprobs_after(reference),
        reference_groups=job.settings.agreement_items)
    lm = ScoredLM(scorer.logprobs, tokenizer, job.settings.max_length,
                  shared=getattr(scorer, "logprobs_after", None), **checked)
    yield from _accuracy_rows(job, None, tokenizer, dataset, row_dataset=requested, lm=lm, scored_by=scored_by,
                              **fields)
    _log_sharing(lm)
    if reference is None:
        return
    for metric, value in lm.agreement().items():
        unit = "fraction" if metric == "agreement_top1" else "nats"
        yield job.row(metric, value, unit, dataset=requested, **fields,
                      notes=f"runtime vs fake-quant reference over the same requests of the first "
                            f"{lm.checked_groups} items ({lm.top1_total} scored tokens, {len(lm.loglik_diffs)} "
                            "requests)")


def ttft(job) -> Iterator[dict]:
    """Cold TTFT, holding the device exclusively for the whole job (harness/devices/lock.py): jobs on other devices
    run alongside, jobs on the same device wait. A last row says how long the job waited and when it held the device."""
    from harness.devices.lock import hold_device
    from harness.measure.ttft import ttft as run

    with hold_device(job.cfg) as held:
        yield from run(job)
    yield job.row("device_lock_wait_s", held.waited_s, "s", notes=held.describe())


def fidelity(job) -> Iterator[dict]:
    """experiment.extra: fidelity_windows (default 8) windows of fidelity_window (default 512) tokens of
    fidelity_text (default ppl-local, the corpus's perplexity split, never used for calibration; python-docs:
    out-of-domain English), which the rows name as their dataset. One kl_fp16 and one top1_agreement row per window (repetition =
    window), so a reader can put an interval on the mean. With a baseline system (system=llamacpp|mnn|...) and no
    quantizer: that engine's own forward pass over the weights its TTFT loads, as kl_fp16_runtime rows. With an npu
    group (npu=sm8750, npu.activation_bits=16): the quantized linears computed by QNN's HTP simulator for that SoC
    (harness/npu/model.py), as kl_fp16_htp / top1_agreement_htp rows labelled simulated. The FP model's pass over
    the windows is shared with the process's previous fidelity point over the same checkpoint and windows."""
    _needs_trained_weights(job, "fidelity")
    if job.cfg.get("quantizer") is None and _brings_its_own_weights(job):
        yield from _engine_fidelity(job)
        return
    from harness.artifact import load_artifact
    from harness.data.streams import fidelity_tokens
    from harness.eval.fidelity import fidelity_of_each as measure_each
    from harness.quant.cache import quantized_artifact
    from harness.quant.fakequant import build_fakequant_model
    from harness.quant.outputs import numerics_column, numerics_text
    from harness.runner.store import NOT_RUN
    from harness.systems.edgeflow import packed_file

    if job.cfg.get("quantizer") is None:
        raise ValueError("experiment=fidelity compares a quantizer with the FP model: add quantizer=<option>")
    model, tokenizer = load_model(job.model)
    art_dir = quantized_artifact(job.model, job.cfg.quantizer, tokenizer)
    artifact = load_artifact(art_dir)
    manifest = artifact.manifest
    if manifest["runtime_compatible"]:
        layout = str(job.cfg.packing.layout) if job.cfg.get("packing") is not None else "weightlet"
        packed = packed_file(job.model.name, art_dir, layout)
        yield job.row("packed_mb", packed.stat().st_size / 1e6, "MB", notes=f"{layout} packing: {packed.name}")
    else:
        yield job.row("packed_mb", None, "MB", status=NOT_RUN, label="not run",
                      error=f"the runtime cannot run it: {manifest.get('runtime_incompatible_reason', '')}")
    yield job.row("effective_bits", manifest["effective_bits_per_weight"], "bits/weight",
                  notes="quantized linears: codes + scales + bit-widths + any extra tensors")
    yield job.row("artifact_mb", sum(f.stat().st_size for f in art_dir.iterdir()) / 1e6, "MB",
                  notes="safetensors artifact (codes stored one per byte)")
    for step, seconds in (manifest.get("timing_s") or {}).items():
        yield job.row(f"{step}_s", seconds, "s", notes=f"when the cached artifact {art_dir.name} was made")
    text = job.settings.fidelity_text
    ids = fidelity_tokens(tokenizer, text).ids
    window, windows = job.settings.fidelity_window, job.settings.fidelity_windows
    # The fake-quant model as the runtime computes (static activation scales, the artifact's numerics: kl_fp16), the
    # variants that locate the error (float outputs: the CPU-only lane, which no NPU computes; per-token dynamic
    # activations; float activations, i.e. weights only), and the runtime itself.
    # Each variant: (metric suffix, what computed it, the model, its label, its columns: numerics [, soc]).
    variants = [("", "fake-quant, static activation scales", build_fakequant_model(artifact, model), "stand-in",
                 {"numerics": numerics_column(manifest)}),
                ("_float_outputs", "fake-quant, static activation scales, float outputs (CPU only: no NPU computes "
                 "it)", build_fakequant_model(artifact, model, numerics="cpu-float"), "stand-in",
                 {"numerics": numerics_column(manifest, numerics="cpu-float")}),
                ("_dynamic", "fake-quant, per-token dynamic activation scales",
                 build_fakequant_model(artifact, model, "dynamic"), "stand-in",
                 {"numerics": numerics_column(manifest, activations="dynamic")}),
                ("_weight_only", "fake-quant, float activations (weights only)",
                 build_fakequant_model(artifact, model, "float"), "stand-in",
                 {"numerics": numerics_column(manifest, activations="float")})]
    if job.cfg.get("npu") is not None:
        variants.append(_htp_variant(job, artifact, model, tokenizer))
    engine = None
    if manifest["runtime_compatible"]:
        from harness.engine.capi import NativeEngine
        from harness.eval.fidelity import LogitsModel

        engine = NativeEngine.open(packed, threads=_engine_threads(job), ctx=window)
        variants.append(("_runtime", f"the runtime over {packed.name}; {numerics_text(manifest)}",
                         LogitsModel(engine.logits), "measured", {"numerics": numerics_column(manifest)}))
    try:  # the FP model runs once per window for every variant
        results = measure_each(model, {suffix: q_model for suffix, _, q_model, _, _ in variants}, ids, window,
                               windows, reference=_fp_reference(job, model))
        for suffix, what, _, label, columns in variants:
            result = results[suffix]
            for metric, unit in (("kl_fp16", "nats/token"), ("top1_agreement", "fraction")):
                key = "kl" if metric == "kl_fp16" else "top1"
                for i, v in enumerate(result[key]):
                    yield job.row(metric + suffix, v, unit, repetition=i, dataset=text, label=label,
                                  notes=f"{what}; {result['protocol']}; {result['reference']}", **columns)
    finally:
        if engine is not None:
            engine.close()


def _htp_variant(job, artifact, model, tokenizer) -> tuple:
    """('_htp', what, the model whose quantized linears QNN HTP computes, 'simulated', its columns: the NPU's numerics
    and the SoC the graphs were compiled for) for the run's npu group."""
    from harness.npu.config import npu_of
    from harness.npu.graph import widths_text
    from harness.quant.outputs import NPU_NUMERICS, numerics_text
    from harness.npu.htp import require_htp
    from harness.npu.model import build_htp_model
    from harness.runner.npu_kinds import calibration_window, where

    require_htp()
    npu = npu_of(job.cfg)
    calibration = calibration_window(tokenizer)
    what = (f"quantized linears on the HTP simulator, {where(npu)}; {widths_text(artifact.linears, npu.activation_bits)}"
            f"; {numerics_text(artifact.manifest)}; CPU ops in float32")
    return ("_htp", what, build_htp_model(artifact, model, npu, calibration), "simulated",
            {"numerics": NPU_NUMERICS, "soc": npu.name})


def _brings_its_own_weights(job) -> bool:
    """The job's system quantizes with no quantizer of ours (a baseline's own format): scored by its own forward
    pass. A system with its own quantizer (EdgeFlow) is scored through its quantizer's artifact."""
    from harness.systems import SYSTEMS

    return job.cfg.get("system") is not None and SYSTEMS.lookup(job.cfg.system.name).own_quantizer is None


def _engine_fidelity(job) -> Iterator[dict]:
    from harness.data.streams import local_ppl_tokens
    from harness.eval.fidelity import HELD_OUT, LogitsModel, fidelity as measure

    system, prepared, bits = _prepared_system(job)
    model, tokenizer = load_model(job.model)
    window, windows = job.settings.fidelity_window, job.settings.fidelity_windows
    with system.open_scorer(prepared, ctx=window) as scorer:
        result = measure(model, LogitsModel(scorer.logits), local_ppl_tokens(tokenizer).ids, window=window,
                         windows=windows, reference=_fp_reference(job, model))
    for metric, key, unit in (("kl_fp16_runtime", "kl", "nats/token"), ("top1_agreement_runtime", "top1", "fraction")):
        for i, v in enumerate(result[key]):
            yield job.row(metric, v, unit, repetition=i, bits=bits, dataset=HELD_OUT,
                          notes=f"{_scored_by(system, prepared)}; {result['protocol']}; {result['reference']}")


def pipeline_sim(job) -> Iterator[dict]:
    """One cold edgeflow-run --profile-ops run of experiment.extra.prompt_tokens tokens on this host (the default
    policy, pipeline.chunk-token chunks), then each policy simulated at phone-like ratios over the median operator
    costs of its warm prefills: the whole prefill (sim_*) and one layer of it (sim_layer_*: what the paper's Figure 14
    times). Rows say their chunk size in `variant` ("chunk 128", Job.row)."""
    import json
    import tempfile

    from transformers import AutoTokenizer

    from harness.data.prompts import fixed_length_prompts
    from harness.devices import get_device
    from harness.engine.run import run_edgeflow
    from harness.models.zoo import checkpoint_dir
    from harness.pipeline_sim import POLICIES, CostTable, sim_inputs_text, simulate
    from harness.systems import get_system

    if job.cfg.get("system") is None or job.cfg.system.name != "edgeflow":
        raise ValueError("experiment=pipeline_sim simulates EdgeFlow's pipeline: add system=edgeflow quantizer=edgeflow")
    system = get_system(job.cfg.system)
    system.configure(job.cfg)
    prepared = system.prepare(job.model, system.weight_bits(8), get_device({"name": "local"}))
    n, threads, warm = job.settings.prompt_tokens, job.settings.threads, job.settings.warm_prefills
    chunk = int(system.pipeline.chunk)
    prompt = fixed_length_prompts(AutoTokenizer.from_pretrained(checkpoint_dir(job.model)), n, 1)[0]
    ids = list(prompt.ids)
    with tempfile.TemporaryDirectory() as tmp:
        profile_path = f"{tmp}/profile.json"
        run_edgeflow(prepared.artifacts["model"], ids, threads=threads, chunk=chunk, ctx=n + 1, evict_cache=True,
                     repeat_prefill=warm, profile_ops=profile_path)
        profile = json.loads(open(profile_path).read())
    # Warm costs: on this host the cold prefill's operators share two cores with the reads and the unpacking, which on
    # a phone run beside the NPU on other cores.
    costs = CostTable.from_profile(profile, warm=True).phone_like()
    notes = (f"simulated (harness/pipeline_sim.py) over the median operator costs of {warm} warm {n}-token prefills "
             f"in {chunk}-token chunks, the accelerator at phone-like ratios: {sim_inputs_text()}")
    for policy in POLICIES:
        for layers, prefix, table in ((profile["n_layers"], "sim_", costs), (1, "sim_layer_", costs.layers_only())):
            s = simulate(policy, table, n_layers=layers, n_tokens=n, chunk=chunk, threads=threads,
                         steal_threshold=system.pipeline.steal_threshold).summary()
            for metric, value, unit in (("latency_s", s["makespan_s"], "s"),
                                        ("cpu_bubble_rate", s.get("cpu-0_bubble_rate"), "ratio"),
                                        ("accel_bubble_rate", s.get("accel-0_bubble_rate"), "ratio"),
                                        ("stolen_tasks", s["stolen"], "count")):
                yield job.row(prefix + metric, value, unit, pipeline=policy, label="simulated", prompt_tokens=n,
                              prompt_source=prompt.source,  # the measured runs' condition: corpus text
                              notes=notes + ("" if layers > 1 else "; one layer (the paper's Figure 14 measure)"))


@dataclass(frozen=True)
class Kind:
    """An experiment kind: what measures it and how the runner treats it. Registered once, in KINDS."""

    measure: Callable[..., Iterator[dict]]  # a generator taking a Job and yielding its rows (job.row(...))
    settings: type            # its `experiment.extra`, typed and validated (harness/runner/settings.py)
    timed: bool = False       # its rows are times of this machine: launchers never run it beside another job
    in_process: bool = False  # evaluates models in this process and times nothing: malloc keeps its heap


KINDS: dict[str, Kind] = {
    "smoke": Kind(smoke, PerplexitySettings),  # a perplexity, then a lambada-local accuracy through lm-eval's HFLM
    "perplexity": Kind(perplexity, PerplexitySettings, in_process=True),
    "accuracy": Kind(accuracy, AccuracySettings, in_process=True),
    "ttft": Kind(ttft, TtftSettings, timed=True),
    "fidelity": Kind(fidelity, FidelitySettings, in_process=True),
    "pipeline_sim": Kind(pipeline_sim, PipelineSimSettings, timed=True),  # its op costs are a cold run's
    "npu_compile": Kind(npu_compile, NpuCompileSettings, timed=True),
    "npu_oracle": Kind(npu_oracle, NpuOracleSettings),
    "npu_profile": Kind(npu_profile, NpuProfileSettings, timed=True),
}
TIMED_KINDS = frozenset(name for name, kind in KINDS.items() if kind.timed)


def settings_of(kind: str, extra: dict):
    """`extra` as `kind`'s settings (harness/runner/settings.py); keys only other kinds take are dropped, keys no kind
    takes are an error."""
    own = {f.name for f in fields(KINDS[kind].settings)}
    anyone = {f.name for k in KINDS.values() for f in fields(k.settings)}
    return build(KINDS[kind].settings, {k: v for k, v in dict(extra).items() if k in own or k not in anyone},
                 "experiment.extra")


def _fp_reference(job, model) -> str:
    """What names the FP model for fidelity's per-process reference cache: its checkpoint and dtype."""
    from harness.models.zoo import checkpoint_dir

    return f"{checkpoint_dir(job.model)} ({model.dtype})"


ITEM_ACCURACY = "item_accuracy"  # one row per document: 1 if the model got it right (prompt_index = lm-eval's doc_id)

# What computes a quantizer's numbers where no engine does: float arithmetic on the quantizer's integer grid, standing
# in for the integer engine that would run it (its rows are labelled stand-in)
FAKE_QUANT = "the fake-quant torch model"


def _model_under_test(job, fp=None):
    """(model, tokenizer, row fields): the FP model, or the fake-quant model of `quantizer` (quantized once, cached);
    with an npu group, the fake-quant model whose quantized linears QNN's HTP simulator computes (scored_by and the
    label `simulated` among the fields; the fake-quant model's rows are labelled stand-in). `fp`: the (FP model,
    tokenizer) if the caller has loaded it."""
    from harness.quant.fakequant import build_fakequant_model
    from harness.quant.outputs import numerics_column

    model, tokenizer = fp or load_model(job.model)
    if job.cfg.get("quantizer") is None:
        return model, tokenizer, {"quantizer": "fp16", "bits": 16.0}
    artifact = _job_artifact(job, tokenizer)
    if job.cfg.get("npu") is not None:  # HTP computes the quantized linears: the NPU's numerics by definition
        _, what, htp_model, label, columns = _htp_variant(job, artifact, model, tokenizer)
        return htp_model, tokenizer, {"scored_by": what, "label": label, **columns}
    return build_fakequant_model(artifact, model), tokenizer, {"scored_by": FAKE_QUANT, "label": "stand-in",
                                                               "numerics": numerics_column(artifact.manifest)}


def _job_artifact(job, tokenizer):
    """The job's quantized artifact (quantized once, cached), its effective bits queued as an extra row."""
    from harness.artifact import load_artifact
    from harness.quant.cache import quantized_artifact

    t0 = time.perf_counter()
    artifact = load_artifact(quantized_artifact(job.model, job.cfg.quantizer, tokenizer))
    job.extra_rows.append(job.row("effective_bits", artifact.manifest["effective_bits_per_weight"], "bits/weight",
                                  notes=f"artifact ready in {time.perf_counter() - t0:.1f} s (cached after the first)"))
    return artifact


def _perplexity_rows(job, model, tokenizer, scored_by: str = "the torch model", label: str | None = None,
                     reference=None, **fields) -> Iterator[dict]:
    """The perplexity row and one row per window scored (window_nll, prompt_index = the window), every window's NLL
    cached. With experiment.ppl_halfwidth and the FP model as `reference`, windows are added until the NLL difference
    from FP16 is known to that interval (harness/eval/sized_perplexity.py), and the reference's NLLs on the same
    windows are rows too (window_nll_ref)."""
    from tqdm.auto import tqdm

    from harness.data.streams import local_ppl_tokens, wikitext2_test_tokens
    from harness.eval.perplexity import summary, window_count, window_nll
    from harness.eval.sized_perplexity import Sizing, WindowCache, sized_windows

    yield from job.take_extra_rows()
    source = job.settings.ppl_source
    stream = wikitext2_test_tokens(tokenizer) if source == "wikitext2" else local_ppl_tokens(tokenizer)
    data_source = "proxy" if source == "local" else "builtin"
    as_measured = "proxy" if source == "local" else "measured"  # the FP16 reference's label, and an engine's
    window = job.settings.ppl_window
    available = window_count(model, stream.ids, window, job.experiment.ppl_max_windows)

    def cached(m, scorer_id: str | None) -> tuple[WindowCache, Callable[[int], float]]:
        cache = (WindowCache.for_scorer(job.model.name, scorer_id, stream.ids, window) if scorer_id
                 else WindowCache(None))
        return cache, cache.scorer(lambda i: window_nll(m, stream.ids, window, i))

    cache, score = cached(model, _window_scorer_id(job, fields))
    refs, how = None, ""
    if reference is not None and job.experiment.ppl_halfwidth is not None:
        ref_cache, ref_score = cached(reference, "fp16")
        sized = sized_windows(score, ref_score, available, Sizing(float(job.experiment.ppl_halfwidth)),
                              progress=lambda text: tqdm.write(f"[perplexity] {text}"))
        nlls, refs, how = sized.nlls, sized.ref_nlls, f"; sized against FP16: {sized.reason}"
        how += f"; FP16: {ref_cache.note()}"
    else:
        nlls = [score(i) for i in tqdm(range(available), desc="perplexity", unit="window", leave=False)]
    result = summary(nlls, window)
    same = dict(label=label or as_measured, dataset=f"ppl-{source}", data_source=data_source, **fields)
    yield job.row("perplexity", result["ppl"], "ppl", **same,
                  notes=f"{stream.protocol}; {result['windows']} windows x {window} tokens; scored by {scored_by}; "
                        f"{cache.note()}{how}")
    for i, nll in enumerate(nlls):
        yield job.row("window_nll", nll, "nats", prompt_index=i, **same)
    for i, nll in enumerate(refs or []):
        yield job.row("window_nll_ref", nll, "nats", prompt_index=i, **{**same, "label": as_measured},
                      notes="the FP16 model's NLL on the same window (the pair of window_nll)")


def _window_scorer_id(job, fields: dict) -> str | None:
    """What computes a perplexity job's window NLLs, as a cache key: "fp16", the quantized artifact's directory name
    (its config and code digest), or None where no key names it completely (the HTP simulator's numerics)."""
    if fields.get("quantizer") == "fp16":
        return "fp16"
    if job.cfg.get("npu") is not None or job.cfg.get("quantizer") is None:
        return None
    from harness.quant.cache import artifact_path

    return artifact_path(job.model.name, job.cfg.quantizer).name


def _accuracy_rows(job, model, tokenizer, dataset, row_dataset: str | None = None, lm=None,
                   scored_by: str = "the torch model", label: str | None = None, **fields) -> Iterator[dict]:
    from harness.eval.accuracy import evaluate_accuracy

    yield from job.take_extra_rows()
    for r in evaluate_accuracy(model, tokenizer, dataset, limit=job.experiment.eval_limit, lm=lm):
        proxy = r.protocol.startswith("proxy")
        same = dict(label=label or ("proxy" if proxy else "measured"), dataset=row_dataset or dataset.name,
                    data_source="proxy" if proxy else "builtin", **fields)
        yield job.row("accuracy" if r.metric == "acc" else r.metric, r.value, "fraction",
                      notes=f"{r.protocol}; lm-eval task {r.task} metric {r.metric}, n={r.n}, shots={r.shots}; "
                            f"scored by {scored_by}", items=r.n, stderr=r.stderr, **same)
        if r.metric == "acc" and r.per_item:  # what pairs two methods item by item (experiments/fig12.py)
            for doc_id, value in sorted(r.per_item.items()):
                yield job.row(ITEM_ACCURACY, value, "fraction", prompt_index=doc_id, **same)
