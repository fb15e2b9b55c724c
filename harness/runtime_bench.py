"""`make bench-runtime`: the native runtime against the machine's INT8 peak and against llama.cpp Q8_0, in one run.

    python -m harness.runtime_bench [--threads 2] [--prompt-tokens 128] [--reps 5]

Prints, side by side: warm prefill tokens/s and GOPS of edgeflow-run (INT8 weights) and of llama.cpp Q8_0
(llama-bench), the measured INT8 peak (edgeflow-bench-int8) and each engine's efficiency against it, and cold TTFT
of edgeflow-run at 4..8 bits (weightlet packing) beside llama.cpp Q8_0 cold. Speed does not depend on the code
values, so the packed files hold random codes of the default model's shapes (harness.pack.synthetic); they are
labelled as such. Numbers are medians over --reps runs with their min..max, and the load average is printed.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import time
from pathlib import Path

from harness.cache import cache_dir, progress_note
from harness.pack import pack_artifact
from harness.pack.synthetic import random_artifact
from harness.runtime import engine_dir, build_runtime, run_edgeflow

# SmolLM2-135M (the default model), as in its manifest.
DEFAULT_CONFIG = {
    "hidden_size": 576, "intermediate_size": 1536, "num_hidden_layers": 30, "num_attention_heads": 9,
    "num_key_value_heads": 3, "head_dim": 64, "vocab_size": 49152, "rms_norm_eps": 1e-5, "rope_theta": 100000.0,
    "max_position_embeddings": 8192, "tie_word_embeddings": True,
}


def linear_params(c: dict) -> int:
    """Weights of the quantized linears: prefill does 2 ops (multiply + add) per weight per token on them."""
    h, i, q, kv = c["hidden_size"], c["intermediate_size"], c["num_attention_heads"] * c["head_dim"], \
        c["num_key_value_heads"] * c["head_dim"]
    return c["num_hidden_layers"] * (h * q + 2 * h * kv + q * h + 3 * h * i)


def synthetic_packed(bits: int) -> Path:
    out = cache_dir("runtime-bench") / f"smollm2-135m-random-{bits}bit.efpk"
    if not out.is_file():
        with progress_note(f"packing a random-code SmolLM2-135M artifact at {bits} bits"):
            pack_artifact(random_artifact(DEFAULT_CONFIG, bits, seed=bits, name="random"), out, layout="weightlet")
    return out


def evict(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def spread(xs: list[float], fmt: str = "{:.3f}") -> str:
    return f"{fmt.format(statistics.median(xs))} ({fmt.format(min(xs))}..{fmt.format(max(xs))})"


def int8_peak(threads: int) -> dict:
    exe = engine_dir() / "edgeflow-bench-int8"
    res = subprocess.run([str(exe), str(threads), "0.5"], capture_output=True, text=True, check=True)
    return json.loads(res.stdout)


def llamacpp_tools() -> tuple[dict | None, str]:
    """({"llama-bench": path, "llama-completion": path, "gguf": path} or None, the reason when None), from the
    llama.cpp baseline (harness.systems.llamacpp_build: cached builds and GGUF conversions, made on first use)."""
    try:
        from harness.models.zoo import checkpoint_dir
        from harness.systems.base import SystemConfig
        from harness.systems.llamacpp_build import build_tools, model_gguf
    except ImportError as e:
        return None, f"the llama.cpp baseline is not available ({e})"
    try:
        from omegaconf import OmegaConf

        from harness.cli import CONF_DIR
        from harness.config import build
        from harness.models.zoo import ModelSpec

        spec = build(ModelSpec, OmegaConf.load(f"{CONF_DIR}/model/smollm2-135m.yaml"), "model")
        version = SystemConfig.llamacpp_version
        tools = build_tools(version, ("llama-bench", "llama-completion"))
        gguf = model_gguf(checkpoint_dir(spec), spec.name, "Q8_0", version)
    except Exception as e:  # a failed build or conversion is reported, the rest of the benchmark goes on
        return None, f"{type(e).__name__}: {str(e)[:300]}"
    return {**{k: str(v) for k, v in tools.items()}, "gguf": str(gguf)}, ""


def llamacpp_pp(tools: dict, threads: int, n_prompt: int, reps: int) -> list[float]:
    res = subprocess.run([tools["llama-bench"], "-m", tools["gguf"], "-p", str(n_prompt), "-n", "0", "-t",
                          str(threads), "-r", str(reps), "-o", "json"], capture_output=True, text=True, timeout=600)
    if res.returncode != 0:
        raise RuntimeError(f"llama-bench failed: {res.stderr[-500:]}")
    row = json.loads(res.stdout)[0]
    return [float(x) for x in row.get("samples_ts") or [row["avg_ts"]]]


def prompt_text(n_tokens: int) -> tuple[str, int]:
    """A plain-text prompt of about n_tokens tokens for llama-completion (which takes text, not ids), and its exact
    length under the default model's tokenizer when the FP16 checkpoint is cached (else the word count)."""
    words = ("the quick brown fox jumps over the lazy dog while a small bird sings in the old oak tree " * 20).split()
    text = " ".join(words[:n_tokens])
    tok_dir = cache_dir("models", "smollm2-135m", "fp16")
    if (tok_dir / "tokenizer.json").is_file():
        from transformers import AutoTokenizer
        tok = AutoTokenizer.from_pretrained(tok_dir)
        ids = tok(text)["input_ids"][:n_tokens]
        text = tok.decode(ids)
        return text, len(tok(text)["input_ids"])
    return text, n_tokens


def llamacpp_cold(tools: dict, threads: int, text: str, reps: int) -> list[float]:
    """Wall time from spawn to exit of llama-completion -n 1 with the GGUF evicted (the baseline's cold protocol)."""
    times = []
    prompt_file = cache_dir("runtime-bench") / "prompt.txt"
    prompt_file.write_text(text)
    for _ in range(reps):
        evict(Path(tools["gguf"]))
        t0 = time.monotonic()
        res = subprocess.run([tools["llama-completion"], "-m", tools["gguf"], "-f", str(prompt_file), "-n", "1",
                              "-t", str(threads), "--no-warmup", "-no-cnv", "--no-display-prompt", "-fit", "off"],
                             capture_output=True, text=True, timeout=600)
        times.append(time.monotonic() - t0)
        if res.returncode != 0:
            raise RuntimeError(f"llama-completion failed: {res.stderr[-500:]}")
    return times


def edgeflow_cold(packed: Path, threads: int, prompt: list[int], reps: int,
                  extra: tuple[str, ...] = ()) -> tuple[list[float], list[dict]]:
    """Wall time spawn -> exit (first token, -n 0 new tokens) with the file evicted, and the engine's reports."""
    walls, reports = [], []
    for _ in range(reps):
        evict(packed)
        t0 = time.monotonic()
        rep = run_edgeflow(packed, prompt, threads=threads, binary=engine_dir() / "edgeflow-run", extra_args=extra)
        walls.append(time.monotonic() - t0)
        reports.append(rep.raw)
    return walls, reports


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    build_runtime()
    prompt = [(1000 + 37 * i) % DEFAULT_CONFIG["vocab_size"] for i in range(a.prompt_tokens)]
    ops_per_token = 2 * linear_params(DEFAULT_CONFIG)
    packed = {b: synthetic_packed(b) for b in range(4, 9)}

    print(f"load average before: {open('/proc/loadavg').read().split()[:3]}  threads={a.threads}  "
          f"prompt={a.prompt_tokens} tokens  model=SmolLM2-135M shapes, random codes (speed only)")
    peak = int8_peak(a.threads)
    fmt = lambda d: ", ".join(f"{k} {v:.1f}" for k, v in d.items())  # noqa: E731
    print(f"INT8 instructions alone (GOPS): {fmt(peak['instruction_gops'])}  -> INT8 peak {peak['int8_peak_gops']:.1f}")
    print(f"exact s8 x s8 -> s32 steps (GOPS): {fmt(peak['step_gops'])}  (sign + multiply [+ widen + add])")
    print(f"our GEMM alone ({peak['gemm_kernel']}, one layer's matmuls, T=128): {peak['gemm_gops']:.1f} GOPS")
    ref_peak = peak["int8_peak_gops"]

    warm = run_edgeflow(packed[8], prompt, threads=a.threads, extra_args=("--repeat-prefill", str(a.reps)))
    ours_tps = warm.raw["warm_prefill_tokens_per_s"]
    ours_gops = ours_tps * ops_per_token / 1e9
    print("\nwarm prefill (weights in memory)        tokens/s      GOPS   of peak")
    print(f"  edgeflow-run INT8 (8-bit codes)    {ours_tps:10.1f} {ours_gops:9.1f}   {ours_gops / ref_peak:6.1%}")
    tools, reason = llamacpp_tools()
    llama_cold = None
    if tools:
        try:
            pp = llamacpp_pp(tools, a.threads, a.prompt_tokens, a.reps)
            ll_gops = statistics.median(pp) * ops_per_token / 1e9
            print(f"  llama.cpp Q8_0 (llama-bench pp)    {statistics.median(pp):10.1f} {ll_gops:9.1f}   "
                  f"{ll_gops / ref_peak:6.1%}   samples {spread(pp, '{:.1f}')}")
            print(f"  ratio edgeflow / llama.cpp: {ours_tps / statistics.median(pp):.2f}x")
            text, n_text = prompt_text(a.prompt_tokens)
            llama_cold = llamacpp_cold(tools, a.threads, text, a.reps)
        except Exception as e:
            print(f"  llama.cpp: not run: {e}")
    else:
        print(f"  llama.cpp: not run: {reason}")

    print("\ncold TTFT (file evicted; wall clock spawn -> exit after the first token; median (min..max) s)")
    base = statistics.median(llama_cold) if llama_cold else None
    if llama_cold:
        print(f"  llama.cpp Q8_0 ({n_text}-token text)     {spread(llama_cold)}")
    runs = [(b, path, ()) for b, path in packed.items()] + [(5, packed[5], ("--no-verify",))]
    for b, path, extra in runs:
        walls, reps = edgeflow_cold(path, a.threads, prompt, a.reps, extra)
        mid = sorted(range(len(walls)), key=walls.__getitem__)[len(walls) // 2]
        bd = reps[mid]["ttft_breakdown_s"]
        ratio = f"  {statistics.median(walls) / base:.2f}x llama.cpp" if base else ""
        label = f"edgeflow {b} bits{' no CRC' if extra else ''} ({path.stat().st_size / 2**20:5.1f} MiB)"
        print(f"  {label:<35}{spread(walls)}{ratio}   engine ttft {reps[mid]['ttft_s']:.3f}: setup {bd['setup']:.3f} "
              f"io {bd['io']:.3f} unpack {bd['unpack']:.3f} compute {bd['compute']:.3f} idle {bd['idle']:.3f}")
    print(f"\nload average after: {open('/proc/loadavg').read().split()[:3]}")


if __name__ == "__main__":
    main()
