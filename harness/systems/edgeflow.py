"""EdgeFlow: our quantizer, packer and native runtime, measured under the same cold-start protocol as the baselines.

prepare: quantize the model with the `quantizer` group at the requested average bits (cached artifact), pack it in
the `packing` group's layout (cached .efpk file), build `edgeflow-run` for the device (host build, or the static
aarch64 build pushed to a phone) and push the packed file.
run_cold: `edgeflow-run MODEL --prompt-text FILE --threads T --policy P ... --ctx C --json` with the workload's
prompt as text (the ids decoded by the model's tokenizer, as llama.cpp gets it), thread budget and context
(harness/measure/workload.py), a fresh process per repetition with the packed file and its tokenizer file evicted.
The engine tokenizes the text inside its clock with the tokenizer file written beside the packed model
(harness/engine/tokenizer_file.py); the ids it reports are checked against the workload's (`tokens_match`). A model
whose tokenizer the engine cannot reproduce gets the ids (`--tokens`), and its rows say so. The JSON report opens
with `{"first_token": N,`, flushed the moment the first token exists; its arrival marks TTFT by wall clock
(primary). The engine's own TTFT and its breakdown (setup, I/O, unpack, compute, idle), per-lane busy / idle time
and bubble rates, stolen tasks and per-operator times are secondary columns; its GEMM kernel is the ISA it ran
with. With new_tokens > 1 (Figure 15) it decodes `--new-tokens new_tokens-1` greedily on the CPU in the same
process; decode time and the gap from the end of prefill to the first decode step ("graph switch": EdgeFlow has no
second graph) come from the report.

The `pipeline` group (conf/pipeline/, PipelineConfig below) selects the scheduling policy and the lane split;
its name is recorded in every row's `pipeline` column, its thread counts as metrics of every row.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from harness.cache import cache_dir, progress_note
from harness.cache_ledger import cache_hit
from harness.engine.run import (DEFAULT_CHUNK, DEFAULT_POLICY, DEFAULT_STEAL_THRESHOLD, POLICIES, ReportError, command,
                                first_token_seen, parse_report, pipeline_args)
from harness.measure.cold import EngineError, repeat, run_once
from harness.measure.workload import Workload, prompt_file, prompt_text
from harness.models.zoo import checkpoint_dir
from harness.systems.base import (CPU_THREADS, Measurement, Metric, NotRun, Prepared, System, cold_metrics,
                                  decode_metrics, register_system)


@dataclass
class PipelineConfig:
    """conf/pipeline/*.yaml: the runtime's scheduling policy and lane split (edgeflow_runtime/src/engine/README.md)."""

    name: str = DEFAULT_POLICY
    chunk: int = DEFAULT_CHUNK
    accel_threads: int = 0  # the accelerator lane's share of system.threads; 0 = threads // 2
    accel_fraction: float | None = None  # or a fraction of system.threads; overrides accel_threads
    steal_threshold: int = DEFAULT_STEAL_THRESHOLD
    lane_help: bool = True
    io_threads: int = 1  # threads blocked in pread; unpacking runs on system.threads (no thread of its own)

    def __post_init__(self):
        if self.name not in POLICIES:
            raise ValueError(f"pipeline.name must be one of {list(POLICIES)}, got {self.name!r}")
        for key, lo in (("chunk", 1), ("accel_threads", 0), ("steal_threshold", 0), ("io_threads", 1)):
            if int(getattr(self, key)) < lo:
                raise ValueError(f"pipeline.{key} must be an integer >= {lo}, got {getattr(self, key)}")
        if self.accel_fraction is not None and not (0 < float(self.accel_fraction) < 1):
            raise ValueError(f"pipeline.accel_fraction must be in (0, 1) or null, got {self.accel_fraction}")

    def accel_share(self, threads: int) -> int:
        """Threads of the accelerator lane out of the engine's budget (0 with one thread: one worker serves both)."""
        if threads <= 1:
            return 0
        if self.accel_fraction is not None:
            return min(threads - 1, max(1, round(threads * float(self.accel_fraction))))
        if self.accel_threads >= threads:
            raise ValueError(f"pipeline.accel_threads must be below system.threads ({threads}), got {self.accel_threads}")
        return self.accel_threads or threads // 2

    def args(self, threads: int) -> list[str]:
        """edgeflow-run's flags for this pipeline."""
        return pipeline_args(policy=self.name, accel_threads=self.accel_share(threads),
                             steal_threshold=self.steal_threshold, chunk=self.chunk, io_threads=self.io_threads,
                             lane_help=self.lane_help)


@register_system
class EdgeFlowSystem(System):
    name = "edgeflow"
    display, short, color = "EdgeFlow", "EF", "#1f77b4"
    own_quantizer, own_packing, own_pipeline = "edgeflow", "weightlet", DEFAULT_POLICY  # the paper's system
    paper_series = "edgeflow"

    @classmethod
    def ttft_phases(cls, m: dict[str, float]) -> dict[str, float] | None:
        if "edgeflow_ttft_s" not in m:
            return None
        return {"process start": m["ttft_s"] - m["edgeflow_ttft_s"], "setup": m.get("edgeflow_setup_s", 0.0),
                "load": m.get("edgeflow_io_s", 0.0), "weight preparation": m.get("edgeflow_unpack_s", 0.0),
                "prefill": m.get("edgeflow_compute_s", 0.0), "bubble": m.get("edgeflow_idle_s", 0.0)}
    decodes = True
    quantizer: dict | None = None  # the job's quantizer group (None: EdgeFlow's defaults)
    layout: str = "weightlet"
    pipeline: PipelineConfig = PipelineConfig()
    verify_crc: bool = True  # check every payload's CRC (a benchmark's variant turns it off)

    def configure(self, cfg) -> None:
        from omegaconf import OmegaConf

        from harness.config import ConfigError, build

        if cfg.get("pipeline") is not None:
            self.pipeline = build(PipelineConfig, cfg.pipeline, "pipeline")
            try:
                self.pipeline.accel_share(int(self.cfg.threads))  # a bad split fails before any work
            except ValueError as e:
                raise ConfigError(str(e)) from None
        if cfg.get("quantizer") is not None:
            self.quantizer = OmegaConf.to_container(cfg.quantizer, resolve=True)
        if cfg.get("packing") is not None:
            self.layout = str(cfg.packing.layout)

    def weight_bits(self, requested: float) -> float:
        """The quantizer's average budget when the job has a quantizer group (fractions allowed), else `requested`."""
        return float((self.quantizer or {}).get("budget_bits", requested))

    def prepare(self, model, bits, device) -> Prepared:
        from harness.artifact import read_manifest
        from harness.quant.cache import quantized_artifact
        from harness.quant.outputs import numerics_column, numerics_text

        qcfg = {**(self.quantizer or {"name": "edgeflow"}), "budget_bits": float(bits)}
        art_dir = quantized_artifact(model, qcfg)
        manifest = read_manifest(art_dir)
        if not manifest.get("runtime_compatible", True):  # e.g. shadow outliers' float path, A16 activations
            raise NotRun(f"our runtime cannot run this artifact: {manifest.get('runtime_incompatible_reason', '')}")
        packed = packed_file(model.name, art_dir, self.layout)
        from harness.engine.build import engine_binary

        binary = engine_binary("host" if device.name == "local" else "aarch64")
        local_packed = packed
        if device.name != "local":
            remote = device.cfg.remote_dir
            binary = device.push(str(binary), f"{remote}/bin/edgeflow-run")
            packed = device.push(str(packed), f"{remote}/models/{packed.name}")
        notes = [f"{self.layout} packing, {manifest['effective_bits_per_weight']:.2f} effective bits/weight "
                 f"(quantized linears), file {os.path.getsize(packed) / 1e6:.1f} MB" if device.name == "local" else
                 f"{self.layout} packing", numerics_text(manifest)]
        files, artifacts = [str(packed)], {"binary": str(binary), "model": str(packed), "artifact": str(art_dir),
                                           "checkpoint": str(checkpoint_dir(model))}
        tok, why = self._tokenizer_file(model, local_packed)
        if tok is None:
            notes.append(f"prompt given as token ids: {why}")
        else:
            if device.name != "local":  # edgeflow-run looks for MODEL.efpk.tok beside the model
                tok = device.push(str(tok), f"{device.cfg.remote_dir}/models/{local_packed.name}.tok")
            files.append(str(tok))
            artifacts["tokenizer_file"] = str(tok)
        # the accelerator lane is CPU threads on every device (src/engine/README.md), computing the NPU's numerics
        columns = {"accelerator": CPU_THREADS, "numerics": numerics_column(manifest)}
        return Prepared(self.name, files, artifacts, f"efpk {self.layout} {float(bits):g} bits", notes, columns)

    @staticmethod
    def _tokenizer_file(model, packed) -> tuple[object, str]:
        """(the tokenizer file beside the packed model, made once, or None; why None)."""
        from harness.engine.tokenizer_file import UnsupportedTokenizer, tokenizer_file_of, write_tokenizer_file

        tok = tokenizer_file_of(packed)
        if not tok.is_file():
            try:
                write_tokenizer_file(checkpoint_dir(model) / "tokenizer.json", tok)
            except (UnsupportedTokenizer, FileNotFoundError) as e:
                return None, str(e)
        return tok, ""

    def open_scorer(self, prepared: Prepared, ctx: int):
        """The runtime's forward pass over the packed file through the C ABI (on this host)."""
        from harness.engine.capi import NativeEngine

        return NativeEngine.open(prepared.artifacts["model"], threads=int(self.cfg.threads), ctx=ctx)

    def reference_model(self, prepared: Prepared, fp_model):
        """The fake-quant model of the artifact the packed file was made from (harness/quant/fakequant.py)."""
        from harness.artifact import load_artifact
        from harness.quant.fakequant import build_fakequant_model

        return build_fakequant_model(load_artifact(prepared.artifacts["artifact"]), fp_model)

    def command(self, prepared: Prepared, work: Workload) -> list[str]:
        # The pipeline group splits the thread budget between the CPU and accelerator lanes; --ctx is the workload's
        # (the same for every engine compared); the first new token is the prefill's.
        text = None
        if "tokenizer_file" in prepared.artifacts:  # the prompt as text, as llama.cpp gets it
            text = prompt_file(work, ".prompt.txt", prompt_text(work, prepared.artifacts["checkpoint"]))
        return command(prepared.artifacts["binary"], prepared.artifacts["model"], work.token_ids,
                       threads=int(work.threads), ctx=work.ctx, new_tokens=max(work.new_tokens - 1, 0),
                       extra_args=self.pipeline.args(int(work.threads)), prompt_text=text,
                       verify_crc=self.verify_crc)

    def run_cold(self, prepared, work, device, protocol) -> Measurement:
        self.check_workload(work)
        cmd = self.command(prepared, work)
        runs = repeat(lambda p: run_once(device, cmd, prepared.files, first_token_seen, self.cfg.timeout_s, p),
                      protocol)
        reps = [cold_metrics(run, device) + engine_metrics(run) for run in runs]  # parses (or rejects) the reports
        report = parse_report(runs[0].stdout).raw
        notes = []
        if "prompt_ids" in report:  # the engine tokenized the text: the same ids as every other engine got?
            match = report["prompt_ids"] == list(work.token_ids)
            reps = [r + [Metric("tokens_match", float(match), "bool")] for r in reps]
            if not match:
                notes.append(f"NOT the same tokens: edgeflow-run tokenizes the prompt text to "
                             f"{len(report['prompt_ids'])} ids, not the workload's {work.n_prompt}")
        engine = {"isa": report.get("gemm_kernel", "not reported"), "unpack_path": report.get("unpack_path"),
                  "threads": report.get("threads"), "policy": report.get("policy"),
                  "cpu_threads": report.get("cpu_threads"), "accel_threads": report.get("accel_threads"),
                  "io_threads": report.get("io_threads"), "io_cpu_s": report.get("io_cpu_s"),
                  "all_threads": all_threads(report),
                  "ctx": work.ctx, "chunk": report.get("chunk"),
                  "flush": "first token flushed as soon as it exists",
                  "prompt": "text, tokenized inside the clock" if "prompt_ids" in report else "token ids",
                  "first_token_text": report.get("first_token_text")}
        return Measurement(self.name, reps, notes, workload=work, command=cmd, engine=engine)


def all_threads(report: dict) -> str:
    """Every thread edgeflow-run ran, in words (the comparison tables print it beside the other engines')."""
    io = report.get("io_threads", 1)
    cpu_ms = f", {1e3 * report['io_cpu_s']:.0f} ms CPU" if "io_cpu_s" in report else ""
    unpack = ("unpacking on them" if report.get("unpack_threads", 0) == 0
              else f"+ {report['unpack_threads']} unpack thread(s) outside the budget")
    return (f"{report.get('threads')} compute ({report.get('cpu_threads')} cpu + {report.get('accel_threads')} accel "
            f"lane; {unpack}) + {io} I/O waiting in pread{cpu_ms}")


def engine_metrics(run) -> list[Metric]:
    """edgeflow-run's own report: its TTFT (clock started after argument parsing) and the TTFT breakdown."""
    try:
        report = parse_report(run.stdout).raw
    except ReportError as e:
        raise EngineError(str(e), run.stderr) from None
    metrics = [Metric("edgeflow_ttft_s", report["ttft_s"], "s"),
               *([Metric("edgeflow_tokenize_s", report["tokenize_s"], "s")] if "tokenize_s" in report else []),
               Metric("edgeflow_bytes_read_mb", report["bytes_read"] / 1e6, "MB")]
    metrics += [Metric(f"edgeflow_{part}_s", seconds, "s") for part, seconds in report["ttft_breakdown_s"].items()]
    # The thread budget and its split: compute lanes (unpacking included: unpack_threads is 0), plus the I/O threads
    # outside the budget, which wait in pread; the CPU time they did spend says whether they competed.
    for key in ("threads", "cpu_threads", "accel_threads", "io_threads", "unpack_threads", "steal_threshold"):
        if key in report:
            metrics.append(Metric(f"edgeflow_{key}", report[key], "count"))
    if "io_cpu_s" in report:
        metrics.append(Metric("edgeflow_io_cpu_s", report["io_cpu_s"], "s"))
    if "io_mode" in report:  # O_DIRECT or buffered reads, and why (harness/engine/run.py: the engine decides)
        metrics.append(Metric("edgeflow_direct_io", float(report["io_mode"].startswith("direct")), "bool",
                              detail=report["io_mode"]))
    # Per-lane busy / idle time and bubble rate (idle / (threads x span)) of the cold prefill.
    for lane, st in report.get("lanes", {}).items():
        if not isinstance(st, dict):
            continue  # span_s
        metrics += [Metric(f"edgeflow_{lane}_busy_s", st["busy_s"], "s"),
                    Metric(f"edgeflow_{lane}_idle_s", st["idle_s"], "s"),
                    Metric(f"edgeflow_{lane}_bubble_rate", st["bubble_rate"], "ratio"),
                    Metric(f"edgeflow_{lane}_stolen_tasks", st["stolen"], "count")]
    metrics += [Metric(f"edgeflow_op_{name}_s", seconds, "s") for name, seconds in report.get("op_s", {}).items()]
    if report.get("new_tokens", 0) > 0:
        metrics += decode_metrics(report["decode_s"], report["new_tokens"], report["prefill_end_to_decode_s"],
                                  "end of the prefill pipeline to the first decode step: EdgeFlow decodes on its CPU "
                                  "lane with the prefill's weights and KV cache, so there is no graph to switch to")
    return metrics


def packed_file(model_name: str, art_dir: Path, layout: str) -> Path:
    """The packed .efpk of an artifact directory, made once (one layer in memory at a time) and cached."""
    from harness.pack import pack_artifact
    from harness.pack.container import VERSION

    # the format version in the name: a file packed by an older writer is not reused
    packed = cache_dir("packed", model_name) / f"{art_dir.name}-{layout}-v{VERSION}.efpk"
    if packed.is_file():
        cache_hit("packed file", packed)
    else:  # (pack_artifact refuses artifacts the runtime cannot run)
        with progress_note(f"packing {art_dir.name} as {layout}", ledger=("packed file", packed)):
            pack_artifact(art_dir, packed, layout=layout)
    return packed
