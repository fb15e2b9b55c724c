"""EdgeFlow: our quantizer, packer and native runtime, measured under the same cold-start protocol as the baselines.

prepare: quantize the model with the `quantizer` group at the requested average bits (cached artifact), pack it in
the `packing` group's layout (cached .efpk file), build `edgeflow-run` for the device (host build, or the static
aarch64 build pushed to a phone) and push the packed file.
run_cold: `edgeflow-run MODEL --tokens ... --threads N --json`, a fresh process per repetition with the packed file
evicted. The JSON report is printed right after the first token, so its arrival marks TTFT by wall clock (primary);
the engine's own TTFT and its breakdown (setup, I/O, unpack, compute, idle) are secondary columns.
With gen_tokens > 1 it decodes `--new-tokens gen_tokens-1` greedily on the CPU in the same process (Figure 15): the
report opens with the first token, flushed at once, so wall-clock TTFT is unchanged; decode time and the gap from
the end of prefill to the first decode step ("graph switch": EdgeFlow has no second graph) come from the report.
"""
from __future__ import annotations

import json
import os
import re

from harness.cache import cache_dir, progress_note
from harness.measure.cold import EngineError, repeat, run_once
from harness.systems.base import (Measurement, Metric, Prepared, System, cold_metrics, decode_metrics,
                                   register_system)


@register_system
class EdgeFlowSystem(System):
    name = "edgeflow"
    decodes = True
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

    def command(self, prepared: Prepared, prompt_ids: list[int]) -> list[str]:
        # --ctx sizes the KV cache to this request (prompt + generated tokens) rather than the model's 8k positions.
        cmd = [prepared.artifacts["binary"], prepared.artifacts["model"], "--tokens", ",".join(map(str, prompt_ids)),
               "--threads", str(self.cfg.threads), "--ctx", str(len(prompt_ids) + self.gen_tokens), "--json"]
        return cmd + (["--new-tokens", str(self.gen_tokens - 1)] if self.gen_tokens > 1 else [])

    def run_cold(self, prepared, prompt_ids, device, protocol) -> Measurement:
        cmd = self.command(prepared, prompt_ids)
        runs = repeat(lambda: run_once(device, cmd, prepared.files, first_token_seen,
                                       self.cfg.timeout_s, protocol), protocol)
        return Measurement(self.name, [cold_metrics(run, device) + engine_metrics(run) for run in runs])


def first_token_seen(out: bytes) -> bool:
    """The report's first line, `{"first_token": N,`, is flushed the moment the first token is known."""
    return re.search(rb'"first_token": -?\d+,', out) is not None


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
    if report.get("new_tokens", 0) > 0:
        metrics += decode_metrics(report["decode_s"], report["new_tokens"], report["prefill_end_to_decode_s"],
                                  "end of the prefill pipeline to the first decode step: EdgeFlow decodes on its CPU "
                                  "lane with the prefill's weights and KV cache, so there is no graph to switch to")
    return metrics
