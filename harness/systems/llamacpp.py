"""llama.cpp baseline: our FP16 checkpoint converted to GGUF and quantised (Q8_0 = the paper's INT8 baseline), run cold
with `llama-completion` (mmap, its default and what phones use).

Command: llama-completion -m M -f PROMPT -n 1 --no-warmup -no-cnv --no-display-prompt -fit off --no-escape
--ignore-eos -t THREADS. With the prompt not echoed, the only bytes on stdout are the generated token, so the first
stdout bytes mark the first token: TTFT (primary) is wall clock from spawn to them. llama.cpp's own
`common_perf_print` load and prompt-eval times (stderr) are secondary columns. The prompt is given as text
decoded from the token ids by the model's tokenizer; the engine's prompt token count is checked against the ids.
`-fit off` skips a second parse of the model's metadata that only matters for GPU offload.
With gen_tokens > 1 (Figure 15), `-n gen_tokens`: llama.cpp's `eval time` (gen_tokens - 1 decode steps) is the
decode time. It prefills and decodes on the CPU with the same weights and graph builder: no graph switch.
"""
from __future__ import annotations

import json
import re
import subprocess
import tempfile
from pathlib import Path

from harness.measure.cold import EngineError, repeat, run_once
from harness.models.zoo import checkpoint_dir
from harness.systems import llamacpp_build as build
from harness.systems.base import (Measurement, Metric, NotRun, Prepared, System, cold_metrics, decode_metrics,
                                   register_system)

BITS_TO_TYPE = {8: "Q8_0", 4: "Q4_0", 16: "F16"}
# `common_perf_print` (this version's completion tool) or `llama_perf_context_print` (older ones), after a log prefix.
_PERF = re.compile(r"(?:common_perf_print|llama_perf_context_print):\s+(load time|prompt eval time|eval time)\s+=\s+"
                   r"([\d.]+) ms(?: /\s+(\d+))?")


@register_system
class LlamaCppSystem(System):
    name = "llamacpp"
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
        return Prepared(self.name, [str(gguf)], {**{k: str(v) for k, v in tools.items()}, "gguf": str(gguf),
                                                 "tokenizer": str(ckpt)}, f"gguf {gtype}")

    def command(self, prepared: Prepared, prompt_file: str) -> list[str]:
        return [prepared.artifacts["llama-completion"], "-m", prepared.artifacts["gguf"], "-f", prompt_file,
                "-n", str(self.gen_tokens), "--no-warmup", "-no-cnv", "--no-display-prompt", "-fit", "off", "--no-escape",
                "--ignore-eos", "-t", str(self.cfg.threads)]

    def run_cold(self, prepared, prompt_ids, device, protocol) -> Measurement:
        from transformers import AutoTokenizer

        text = AutoTokenizer.from_pretrained(prepared.artifacts["tokenizer"]).decode(prompt_ids)
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write(text)
        cmd = self.command(prepared, f.name)
        try:
            runs = repeat(lambda: run_once(device, cmd, prepared.files, lambda out: len(out) > 0, self.cfg.timeout_s,
                                           protocol), protocol)
        finally:
            Path(f.name).unlink(missing_ok=True)
        reps = [cold_metrics(r, device) + perf_metrics(r.stderr) + self.decode_perf(r.stderr) for r in runs]
        notes = [f"weights: {prepared.weight_format}", "mmap (llama.cpp default)"]
        engine_tokens = {m.value for rep in reps for m in rep if m.name == "prompt_tokens"}
        if engine_tokens != {len(prompt_ids)}:
            notes.append(f"llama.cpp tokenised the prompt to {sorted(engine_tokens)} tokens, not {len(prompt_ids)}")
        return Measurement(self.name, reps, notes)


    def decode_perf(self, stderr: bytes) -> list[Metric]:
        """Decode time from llama.cpp's `eval time = X ms / N runs` (N = gen_tokens - 1 decode steps)."""
        if self.gen_tokens <= 1:
            return []
        found = {m.group(1): m for m in _PERF.finditer(stderr.decode("utf-8", "replace"))}
        ev = found.get("eval time")
        if ev is None or ev.group(3) is None:
            raise EngineError("llama-completion printed no `eval time` perf line after decoding", stderr)
        if int(ev.group(3)) != self.gen_tokens - 1:
            raise EngineError(f"llama-completion decoded {ev.group(3)} tokens, not {self.gen_tokens - 1} "
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


def bench_throughput(prepared: Prepared, n_prompt: int, n_gen: int, threads: int, timeout_s: float,
                     repetitions: int = 3) -> list[Metric]:
    """Warm throughput from `llama-bench -o json` (prompt processing and generation tokens/s)."""
    cmd = [prepared.artifacts["llama-bench"], "-m", prepared.artifacts["gguf"], "-p", str(n_prompt), "-n", str(n_gen),
           "-t", str(threads), "-r", str(repetitions), "-o", "json"]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    if res.returncode != 0:
        raise EngineError(f"llama-bench exited with status {res.returncode}", res.stderr)
    try:
        rows = json.loads(res.stdout)
        out = []
        for row in rows:
            kind = "pp" if row["n_prompt"] > 0 and row["n_gen"] == 0 else "tg"
            out.append(Metric(f"llamacpp_{kind}_tokens_per_s", float(row["avg_ts"]), "tokens/s"))
        return out
    except (ValueError, KeyError, TypeError) as e:
        raise EngineError(f"cannot parse llama-bench JSON ({e}): {res.stdout[:300]!r}", res.stderr) from None


def perplexity(llama_perplexity: str, gguf: str, text_file: str, ctx: int, threads: int, timeout_s: float,
               chunks: int | None = None) -> float:
    """`llama-perplexity -f text -c ctx [--chunks N]`: llama.cpp's final estimate over non-overlapping ctx-token windows
    of the text (each window scored on its second half). Give it the harness's perplexity text
    (harness.data.corpus.load_corpus().split_text("perplexity")) so its accuracy sits on the same scale."""
    cmd = [llama_perplexity, "-m", gguf, "-f", text_file, "-c", str(ctx), "-b", str(ctx), "-t", str(threads)]
    if chunks:
        cmd += ["--chunks", str(chunks)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    m = re.search(r"Final estimate: PPL = ([\d.]+)", res.stdout + res.stderr)
    if res.returncode != 0 or not m:
        raise EngineError(f"llama-perplexity failed (status {res.returncode}) or printed no final estimate", res.stderr)
    return float(m.group(1))
