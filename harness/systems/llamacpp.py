"""llama.cpp baseline: our FP16 checkpoint converted to GGUF and quantised (Q8_0 = the paper's INT8 baseline), run cold
with `llama-completion` (mmap, its default and what phones use).

Command (`command`): llama-completion -m M -f PROMPT -n N --no-warmup -no-cnv --no-display-prompt -fit off
--no-escape --ignore-eos -c CTX -b B -ub UB -t T -tb T, from the workload (harness/measure/workload.py):
- CTX = work.ctx, the request-sized context every engine of the comparison is given (llama.cpp pads its KV cache to
  256 cells and needs 4 spare positions, which `request_ctx` already respects; a ctx it would pad is refused). The
  engine's own `generate: n_ctx = N, n_batch = B` line is checked against it in every run.
- B / UB: the logical and physical batch hold the whole prompt (llama.cpp's defaults 2048 / 512, raised to the
  prompt's length for longer prompts), so the prompt is prefilled in one pass.
- T: work.threads for generation and for prompt processing (-tb), checked against its `system_info` line, whose
  CPU feature flags (AVX2 = 1, AVX512_VNNI = 1, ...) are recorded as the ISA it ran with.
Timed event: with the prompt not echoed, the only bytes llama-completion writes to stdout before it exits are the
generated token's text (its log thread flushes every line it writes), so the first stdout byte is the first generated
token: TTFT (primary) is wall clock from spawn to it. llama.cpp's own `common_perf_print` load and prompt-eval times
(stderr) are secondary columns. The prompt is given as text decoded from the token ids by the model's tokenizer
(llama-completion takes no ids); `llama-tokenize` checks, once per prompt and outside the timed runs, that llama.cpp
tokenizes that text back to exactly the ids, and a mismatch is recorded in the notes and in `tokens_match`.
`-fit off` skips a second parse of the model's metadata that only matters for GPU offload.
Kernel path: the fastest of llama.cpp's weight paths that runs on this host (AMX / repacked weights, else
`--no-repack`), probed once per build on a tiny model (harness/systems/llamacpp_probe.py); the scorer uses the same.
Every row's notes name the path and the buffer types its probe run put the weights in (AMX, CPU_REPACK, CPU_Mapped).
N = work.new_tokens (1: the cold start only). With N > 1 (Figure 15) llama.cpp's `eval time` (N - 1 decode steps) is the
decode time. It prefills and decodes on the CPU with the same weights and graph builder: no graph switch.
"""
from __future__ import annotations

import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from harness.measure.cold import EngineError, repeat, run_once
from harness.models.zoo import checkpoint_dir
from harness.systems import llamacpp_build as build
from harness.systems import llamacpp_probe as probe
from harness.measure.workload import CTX_ALIGN, CTX_SPARE, Workload, prompt_file, prompt_text
from harness.systems.base import (Measurement, Metric, NotRun, Prepared, System, SystemConfig, cold_metrics,
                                  decode_metrics, register_system)

BITS_TO_TYPE = {8: "Q8_0", 4: "Q4_0", 16: "F16"}
# `common_perf_print` (this version's completion tool) or `llama_perf_context_print` (older ones), after a log prefix.
_PERF = re.compile(r"(?:common_perf_print|llama_perf_context_print):\s+(load time|prompt eval time|eval time)\s+=\s+"
                   r"([\d.]+) ms(?: /\s+(\d+))?")
_SYSTEM_INFO = re.compile(r"system_info: n_threads = (\d+)(?: \(n_threads_batch = (\d+)\))? / \d+ \| (.*)")
_GENERATE = re.compile(r"generate: n_ctx = (\d+), n_batch = (\d+)")
DEFAULT_BATCH, DEFAULT_UBATCH = 2048, 512  # llama.cpp's common_params defaults


@dataclass
class LlamaCppConfig(SystemConfig):
    """conf/system/llamacpp.yaml."""

    gguf_type: str = "Q8_0"  # llama-quantize type for bits=8 (any type llama-quantize knows may be configured)
    llamacpp_version: str = "0.3.36"  # llama-cpp-python sdist that vendors the llama.cpp source


@register_system
class LlamaCppSystem(System):
    name = "llamacpp"
    display, color = "llama.cpp", "#8c564b"
    stand_in, paper_series = "int8", "llamacpp"  # Q8_0: INT8 weights

    @classmethod
    def ttft_phases(cls, m: dict[str, float]) -> dict[str, float] | None:
        if "llamacpp_load_s" not in m:
            return None
        clock, prefill = m["llamacpp_load_s"], m["llamacpp_prompt_eval_s"]  # clock: perf reset to first eval's end
        return {"load": m["ttft_s"] - clock, "setup": clock - prefill, "prefill": prefill}  # load: + process start
    config_type = LlamaCppConfig
    decodes = True

    def gguf_type(self, bits: int) -> str:
        if bits == 8:
            return self.cfg.gguf_type  # Q8_0 by default; any llama-quantize type may be configured
        if bits not in BITS_TO_TYPE:
            raise ValueError(f"llamacpp: no default GGUF type for bits={bits}; allowed {sorted(BITS_TO_TYPE)}")
        return BITS_TO_TYPE[bits]

    def prepare(self, model, bits, device) -> Prepared:
        if device.name != "local":
            raise NotRun(f"llama.cpp is built here for this host only; on {device.name} push an aarch64 build "
                         "(not part of this harness yet)")
        version = self.cfg.llamacpp_version
        tools = build.build_tools(version)
        ckpt = checkpoint_dir(model)
        gtype = self.gguf_type(bits)
        gguf = build.model_gguf(ckpt, model.name, gtype, version)
        kernels = probe.kernel_path(tools, version, gtype, int(self.cfg.threads))
        return Prepared(self.name, [str(gguf)], {**{k: str(v) for k, v in tools.items()}, "gguf": str(gguf),
                                                 "checkpoint": str(ckpt), "kernel_path": kernels.path.name},
                        f"gguf {gtype}", notes=[kernels.note()])

    def open_scorer(self, prepared: Prepared, ctx: int):
        from harness.systems.llamacpp_scorer import LlamaCppScorer

        return LlamaCppScorer.open(prepared.artifacts["gguf"], ctx=ctx, threads=int(self.cfg.threads),
                                   version=self.cfg.llamacpp_version,
                                   extra_buffers=kernel_path(prepared).extra_buffers)

    def check_workload(self, work: Workload) -> None:
        super().check_workload(work)
        if work.ctx % CTX_ALIGN or work.ctx < work.n_prompt + max(work.new_tokens, CTX_SPARE):
            raise ValueError(f"llamacpp: workload.ctx={work.ctx} is not what llama.cpp would allocate for a "
                             f"{work.n_prompt}-token prompt generating {work.new_tokens} (a multiple of {CTX_ALIGN}, "
                             f">= prompt + max(new tokens, {CTX_SPARE})); use harness.measure.workload.request_ctx")

    def command(self, prepared: Prepared, prompt_path: str, work: Workload) -> list[str]:
        batch, ubatch = max(DEFAULT_BATCH, work.n_prompt), max(DEFAULT_UBATCH, work.n_prompt)
        return [prepared.artifacts["llama-completion"], "-m", prepared.artifacts["gguf"], "-f", prompt_path,
                "-n", str(work.new_tokens), "--no-warmup", "-no-cnv", "--no-display-prompt", "-fit", "off",
                "--no-escape", "--ignore-eos", "-c", str(work.ctx), "-b", str(batch), "-ub", str(ubatch),
                "-t", str(work.threads), "-tb", str(work.threads), *kernel_path(prepared).completion_args]

    def run_cold(self, prepared, work, device, protocol) -> Measurement:
        self.check_workload(work)
        text = prompt_text(work, prepared.artifacts["checkpoint"])
        # A file named by the ids' digest, kept: the printed command line can be run again as it is.
        cmd = self.command(prepared, str(prompt_file(work, ".txt", prompt_file_text(text))), work)
        engine_ids = tokenize(prepared.artifacts.get("llama-tokenize"), prepared.artifacts["gguf"], text,
                              self.cfg.timeout_s)
        runs = repeat(lambda p: run_once(device, cmd, prepared.files, lambda out: len(out) > 0, self.cfg.timeout_s, p),
                      protocol)
        engine = {**engine_settings(runs[0].stderr), "kernel_path": kernel_path(prepared).name}
        for r in runs:
            check_engine_settings(engine_settings(r.stderr), work)
        match = engine_ids == list(work.token_ids)
        reps = [cold_metrics(r, device) + perf_metrics(r.stderr) + decode_perf(r.stderr, work.new_tokens)
                + [Metric("tokens_match", float(match), "bool")] for r in runs]
        notes = [f"weights: {prepared.weight_format}", "mmap (llama.cpp default)"]
        if not match:
            first = next((i for i, (a, b) in enumerate(zip(engine_ids, work.token_ids)) if a != b),
                         min(len(engine_ids), work.n_prompt))
            notes.append(f"NOT the same tokens: llama.cpp tokenizes the prompt text to {len(engine_ids)} ids, not the "
                         f"workload's {work.n_prompt} (first difference at position {first})")
        return Measurement(self.name, reps, notes, workload=work, command=cmd,
                           engine={**engine, "tokens_match": match})


def kernel_path(prepared: Prepared) -> probe.KernelPath:
    """The kernel path prepare() probed (every engine of llama.cpp run on these weights takes it)."""
    name = prepared.artifacts.get("kernel_path")
    if name not in probe.BY_NAME:
        raise ValueError(f"llamacpp: prepared artifacts name no known kernel path ({name!r}); prepare() probes it")
    return probe.BY_NAME[name]


def prompt_file_text(text: str) -> str:
    """What to write to llama-completion's -f file so that it reads exactly `text`: its -f handler drops one
    trailing newline (common/arg.cpp), which would drop the prompt's last token when that is a newline."""
    return text + "\n" if text.endswith("\n") else text


def tokenize(tool: str | None, gguf: str, text: str, timeout_s: float) -> list[int]:
    """The ids llama.cpp's own tokenizer gives the prompt text as llama-completion sees it (`llama-tokenize --ids`
    on the exact text, no escape processing, special tokens parsed (its default) and BOS added per the model's
    metadata, as `common_tokenize(ctx, prompt, true, true)` does in llama-completion)."""
    if not tool:
        raise EngineError("llama-tokenize is not among the prepared tools: cannot check that llama.cpp is given the "
                          "workload's token ids")
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write(text)  # llama-tokenize reads -f verbatim
    try:
        res = subprocess.run([tool, "-m", gguf, "-f", f.name, "--ids", "--no-escape",
                              "--log-disable"], capture_output=True, text=True, timeout=timeout_s)
    finally:
        Path(f.name).unlink(missing_ok=True)
    if res.returncode != 0:
        raise EngineError(f"llama-tokenize exited with status {res.returncode}", res.stderr)
    m = re.search(r"\[([\d,\s]*)\]\s*$", res.stdout)
    if not m:
        raise EngineError(f"llama-tokenize printed no id list: {res.stdout[-300:]!r}", res.stderr)
    return [int(x) for x in m.group(1).replace(",", " ").split()]


def engine_settings(stderr: bytes) -> dict:
    """What llama-completion says it runs with: threads (generation, batch), n_ctx, n_batch and the ISA (the CPU
    features of its system_info line that are on, e.g. "AVX2 AVX512 AVX512_VNNI")."""
    text = stderr.decode("utf-8", "replace")
    info, gen = _SYSTEM_INFO.search(text), _GENERATE.search(text)
    if not info or not gen:
        raise EngineError("llama-completion printed no system_info or generate line (threads, n_ctx)", stderr)
    flags = [k.strip() for part in info.group(3).split("|") for k, _, v in [part.partition("=")]
             if v.strip() == "1" and k.strip()]
    # CPU : SSE3 = 1 -> the first flag carries the backend name before a colon
    flags = [f.split(":")[-1].strip() for f in flags]
    simd = [f for f in flags if f not in ("LLAMAFILE", "OPENMP", "REPACK")]
    threads, batch = int(info.group(1)), int(info.group(2) or info.group(1))
    return {"threads": threads, "threads_batch": batch,
            "all_threads": f"{threads} generation / {batch} prompt-processing threads (ggml's pool; mmap I/O in them)",
            "ctx": int(gen.group(1)), "n_batch": int(gen.group(2)), "isa": " ".join(simd),
            "features": " ".join(flags)}


def check_engine_settings(engine: dict, work: Workload) -> None:
    """The engine ran with the workload's context and threads (it could silently clamp or pad them)."""
    for key, want in (("ctx", work.ctx), ("threads", work.threads), ("threads_batch", work.threads)):
        if engine[key] != want:
            raise EngineError(f"llama-completion ran with {key}={engine[key]}, the workload asked for {want}")
    if engine["n_batch"] < work.n_prompt:
        raise EngineError(f"llama-completion's n_batch={engine['n_batch']} is smaller than the "
                          f"{work.n_prompt}-token prompt: it would not prefill in one pass")


def decode_perf(stderr: bytes, new_tokens: int) -> list[Metric]:
    """Decode time from llama.cpp's `eval time = X ms / N runs` (N = new_tokens - 1 decode steps)."""
    if new_tokens <= 1:
        return []
    found = {m.group(1): m for m in _PERF.finditer(stderr.decode("utf-8", "replace"))}
    ev = found.get("eval time")
    if ev is None or ev.group(3) is None:
        raise EngineError("llama-completion printed no `eval time` perf line after decoding", stderr)
    if int(ev.group(3)) != new_tokens - 1:
        raise EngineError(f"llama-completion decoded {ev.group(3)} tokens, not {new_tokens - 1} "
                          "(stopped early: context full?)", stderr)
    return decode_metrics(float(ev.group(2)) / 1e3, int(ev.group(3)), None,
                          "not applicable: llama.cpp prefills and decodes on the CPU with the same weights and "
                          "graph builder, so there is no second graph to switch to")


def perf_metrics(stderr: bytes) -> list[Metric]:
    """llama.cpp's own timings from its perf-print lines on stderr (secondary columns)."""
    found = {m.group(1): m for m in _PERF.finditer(stderr.decode("utf-8", "replace"))}
    if "load time" not in found or "prompt eval time" not in found:
        raise EngineError("llama-completion printed no perf lines (load time / prompt eval time)", stderr)
    pe = found["prompt eval time"]
    return [Metric("llamacpp_load_s", float(found["load time"].group(2)) / 1e3, "s"),
            Metric("llamacpp_prompt_eval_s", float(pe.group(2)) / 1e3, "s"),
            Metric("prompt_tokens", int(pe.group(3)), "tokens")]
