"""EdgeFlow: our quantizer, packer and native runtime, measured under the same cold-start protocol as the baselines.

prepare: quantize the model with the `quantizer` group at the requested average bits (cached artifact), pack it in
the `packing` group's layout (cached .efpk file), build `edgeflow-run` for the device (host build, or the static
aarch64 build pushed to a phone) and push the packed file.
run_cold: `edgeflow-run MODEL --tokens IDS --threads T --ctx C --json` with the workload's ids, thread budget and
context (harness/measure/workload.py), a fresh process per repetition with the packed file evicted. The JSON report
(which holds the first generated token) is the first thing it writes to stdout, right after the first token; its
arrival marks TTFT by wall clock (primary). stdout is a pipe, so the report reaches us when the engine flushes it at
exit: the timed event includes the engine's teardown (`engine["flush"]` says so). The engine's own TTFT and its
breakdown (setup, I/O, unpack, compute, idle) are secondary columns; its GEMM kernel is the ISA it ran with.
"""
from __future__ import annotations

import json
import os

from harness.cache import cache_dir, progress_note
from harness.measure.cold import EngineError, repeat, run_once
from harness.measure.workload import Workload
from harness.systems.base import Measurement, Metric, Prepared, System, cold_metrics, register_system


@register_system
class EdgeFlowSystem(System):
    name = "edgeflow"
    quantizer: dict | None = None  # the job's quantizer group (None: EdgeFlow's defaults)
    layout: str = "weightlet"

    def configure(self, cfg) -> None:
        from omegaconf import OmegaConf

        if cfg.get("quantizer") is not None:
            self.quantizer = OmegaConf.to_container(cfg.quantizer, resolve=True)
        if cfg.get("packing") is not None:
            self.layout = str(cfg.packing.layout)

    def prepare(self, model, bits, device) -> Prepared:
        from harness import native
        from harness.artifact import load_artifact
        from harness.pack import pack_artifact
        from harness.quant.cache import quantized_artifact

        qcfg = {**(self.quantizer or {"name": "edgeflow"}), "budget_bits": float(bits)}
        art_dir = quantized_artifact(model, qcfg)
        artifact = load_artifact(art_dir)  # pack_artifact refuses artifacts the runtime cannot run
        packed = cache_dir("packed", model.name) / f"{art_dir.name}-{self.layout}.efpk"
        if not packed.is_file():
            with progress_note(f"packing {art_dir.name} as {self.layout}"):
                pack_artifact(artifact, packed, layout=self.layout)
        build = "host" if device.name == "local" else "aarch64"
        binary = native.build(build, target="edgeflow-run") / "src" / "engine" / "edgeflow-run"
        if device.name != "local":
            remote = device.cfg.remote_dir
            binary = device.push(str(binary), f"{remote}/bin/edgeflow-run")
            packed = device.push(str(packed), f"{remote}/models/{packed.name}")
        notes = [f"{self.layout} packing, {artifact.manifest['effective_bits_per_weight']:.2f} effective bits/weight "
                 f"(quantized linears), file {os.path.getsize(packed) / 1e6:.1f} MB" if device.name == "local" else
                 f"{self.layout} packing"]
        return Prepared(self.name, [str(packed)], {"binary": str(binary), "model": str(packed)},
                        f"efpk {self.layout} {float(bits):g} bits", notes)

    def command(self, prepared: Prepared, work: Workload) -> list[str]:
        # --ctx sizes the KV cache as the workload says (the request's size, the same for every engine compared).
        return [prepared.artifacts["binary"], prepared.artifacts["model"], "--tokens",
                ",".join(map(str, work.token_ids)), "--threads", str(work.threads), "--ctx", str(work.ctx), "--json"]

    def run_cold(self, prepared, work, device, protocol) -> Measurement:
        self.check_workload(work)
        cmd = self.command(prepared, work)
        runs = repeat(lambda: run_once(device, cmd, prepared.files, lambda out: b'"ttft_s"' in out,
                                       self.cfg.timeout_s, protocol), protocol)
        reps = [cold_metrics(run, device) + engine_metrics(run) for run in runs]  # parses (or rejects) the reports
        report = json.loads(runs[0].stdout)
        engine = {"isa": report.get("gemm_kernel", "not reported"), "unpack_path": report.get("unpack_path"),
                  "threads": report.get("threads"), "accel_emulator_threads": report.get("threads"),
                  "io_threads": report.get("io_threads"), "unpack_threads": report.get("unpack_threads"),
                  "ctx": work.ctx, "chunk": report.get("chunk"),
                  "flush": "report buffered, flushed at exit (includes teardown)"}
        return Measurement(self.name, reps, workload=work, command=cmd, engine=engine)


def engine_metrics(run) -> list[Metric]:
    """edgeflow-run's own report: its TTFT (clock started after argument parsing) and the TTFT breakdown."""
    try:
        report = json.loads(run.stdout)
    except json.JSONDecodeError:
        raise EngineError(f"edgeflow-run printed something that is not its JSON report: {run.stdout[-300:]!r}",
                          run.stderr) from None
    metrics = [Metric("edgeflow_ttft_s", report["ttft_s"], "s"),
               Metric("edgeflow_bytes_read_mb", report["bytes_read"] / 1e6, "MB")]
    metrics += [Metric(f"edgeflow_{part}_s", seconds, "s") for part, seconds in report["ttft_breakdown_s"].items()]
    return metrics
