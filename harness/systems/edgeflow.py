"""EdgeFlow: our quantizer, packer and native runtime, measured under the same cold-start protocol as the baselines.

prepare: quantize the model with the `quantizer` group at the requested average bits (cached artifact), pack it in
the `packing` group's layout (cached .efpk file), build `edgeflow-run` for the device (host build, or the static
aarch64 build pushed to a phone) and push the packed file.
run_cold: `edgeflow-run MODEL --tokens ... --threads N --json`, a fresh process per repetition with the packed file
evicted. The JSON report is printed right after the first token, so its arrival marks TTFT by wall clock (primary);
the engine's own TTFT and its breakdown (setup, I/O, unpack, compute, idle) are secondary columns.
"""
from __future__ import annotations

import json
import os

from harness.cache import cache_dir, progress_note
from harness.measure.cold import EngineError, repeat, run_once
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
        artifact = load_artifact(art_dir)
        if not artifact.manifest.get("runtime_compatible", True):
            raise ValueError(f"quantizer {qcfg['name']} cannot run in edgeflow-run: "
                             f"{artifact.manifest.get('runtime_incompatible_reason')}")
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

    def command(self, prepared: Prepared, prompt_ids: list[int]) -> list[str]:
        # --ctx sizes the KV cache to this request (first token only) rather than the model's 8k positions.
        return [prepared.artifacts["binary"], prepared.artifacts["model"], "--tokens", ",".join(map(str, prompt_ids)),
                "--threads", str(self.cfg.threads), "--ctx", str(len(prompt_ids) + 1), "--json"]

    def run_cold(self, prepared, prompt_ids, device, protocol) -> Measurement:
        cmd = self.command(prepared, prompt_ids)
        runs = repeat(lambda: run_once(device, cmd, prepared.files, lambda out: b'"ttft_s"' in out,
                                       self.cfg.timeout_s, protocol), protocol)
        return Measurement(self.name, [cold_metrics(run, device) + engine_metrics(run) for run in runs])


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
