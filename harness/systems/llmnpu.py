"""llm.npu (mllm) baseline: runs the user's mllm NPU demo binary on an Android phone and parses what it prints.

mllm has no registry package and needs Qualcomm's QNN runtime on a phone, so nothing here builds it: the user gives
`system.binary` (the demo, built with mllm's Android/QNN scripts) and `system.model_files`; both are pushed to
`device.remote_dir` and the demo runs there cold under the shared protocol. Anywhere else every row says "not run"
with the reason (NotRun), and no other engine stands in for it.

What the demos print (read from mllm's source, UbiquitousLearning/mllm):
- v1 (the llm.npu paper's code), examples/demo_qwen_npu.cpp: "[Q] <prompt>" then "[A] " and the generated text; no
  timings. First token = the first bytes after "[A] ".
- v2, examples/qwen_npu/main.cpp: MLLM_INFO lines "QNN prefill completed: seq_len=N, time=T.TTs" (or "CPU prefill
  ..."), the first token's text right after, then "[Decode step   k] time: X.XXms".
- v2 mllm/models/ARGeneration.cpp perfSummary(): "Prefill time : X μs", "Decode time : X μs", "TTFT : X μs".
The demos use their built-in prompts; the engine's prompt length is reported as `prompt_tokens` when printed.
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from harness.measure.cold import repeat, run_once
from harness.systems.base import (Measurement, Metric, NotRun, Prepared, System, SystemConfig, cold_metrics,
                                  register_system)

_PREFILL_DONE = re.compile(rb"(?:QNN|CPU) prefill completed: seq_len=(\d+), time=([\d.]+)s")
_DECODE_STEP = re.compile(rb"\[Decode step\s+\d+\] time: ([\d.]+)ms")
_SUMMARY = re.compile(r"(Prefill time|Decode time|TTFT)\s*:\s*([\d.]+)\s*μs")


@dataclass
class LlmNpuConfig(SystemConfig):
    """conf/system/llmnpu.yaml."""

    binary: str | None = None  # local path of the mllm NPU demo binary, pushed to the device
    model_files: list[str] = field(default_factory=list)  # its model files (local paths)
    extra_args: list[str] = field(default_factory=list)  # arguments for the demo


@register_system
class LlmNpuSystem(System):
    name = "llmnpu"
    display, color = "llm.npu+", "#7f7f7f"
    stand_in, paper_series = "shadow_outlier", "llmnpu"  # per-tensor INT8 with shadow outliers
    config_type = LlmNpuConfig

    def prepare(self, model, bits, device) -> Prepared:
        if device.name != "android":
            raise NotRun(f"llm.npu (mllm) runs only on an Android phone with a Qualcomm NPU (QNN); device is {device.name}")
        if not self.cfg.binary:
            raise NotRun("system.binary is not set: build mllm's NPU demo for the phone and give its path "
                         "(and system.model_files)")
        for f in [self.cfg.binary, *self.cfg.model_files]:
            if not Path(f).is_file():
                raise FileNotFoundError(f"llmnpu: {f} does not exist (system.binary / system.model_files)")
        remote = device.cfg.remote_dir
        binary = device.push(self.cfg.binary, f"{remote}/{Path(self.cfg.binary).name}")
        files = [device.push(f, f"{remote}/{Path(f).name}") for f in self.cfg.model_files]
        return Prepared(self.name, files, {"binary": binary, "cwd": remote},
                        f"mllm model files as given ({', '.join(Path(f).name for f in self.cfg.model_files)})",
                        notes=[f"model={model.name} bits={bits}: the demo's own model files are used"])

    def run_cold(self, prepared, work, device, protocol) -> Measurement:
        # The demo runs its own prompt with its own context and threads: it cannot be given `work`, so its
        # measurement carries no workload and no comparison can take it as doing the same work.
        device.run(["chmod", "755", prepared.artifacts["binary"]])
        cmd = [prepared.artifacts["binary"], *self.cfg.extra_args]
        runs = repeat(lambda p: run_once(device, cmd, prepared.files, first_token_seen, self.cfg.timeout_s, p,
                                         cwd=prepared.artifacts["cwd"]), protocol)
        reps = [cold_metrics(r, device) + demo_metrics(r.stdout + r.stderr) for r in runs]
        return Measurement(self.name, reps, [f"command: {shlex.join(cmd)}",
                                             "the demo's built-in prompt, not the sweep's prompt ids"],
                           workload=None, command=cmd)


def first_token_seen(out: bytes) -> bool:
    """v2: the prefill-completed line and at least one byte after it (the first token); v1: a byte after "[A] "."""
    m = _PREFILL_DONE.search(out)
    if m:
        return len(out[m.end():].lstrip(b"\r\n")) > 0
    i = out.find(b"[A] ")
    return i >= 0 and len(out) > i + 4


def demo_metrics(out: bytes) -> list[Metric]:
    """Engine-reported timings, whichever of the demo's formats appear (none for the v1 demo)."""
    metrics = []
    m = _PREFILL_DONE.search(out)
    if m:
        metrics += [Metric("prompt_tokens", int(m.group(1)), "tokens"), Metric("llmnpu_prefill_s", float(m.group(2)), "s")]
    steps = [float(x) for x in _DECODE_STEP.findall(out)]
    if steps:
        metrics.append(Metric("llmnpu_decode_ms_per_token", sum(steps) / len(steps), "ms"))
    for name, value in _SUMMARY.findall(out.decode("utf-8", "replace")):
        key = {"Prefill time": "llmnpu_prefill_s", "Decode time": "llmnpu_decode_s", "TTFT": "llmnpu_ttft_s"}[name]
        if key not in {x.name for x in metrics}:
            metrics.append(Metric(key, float(value) / 1e6, "s"))
    return metrics
