"""Which of llama.cpp's weight kernels work on this host: each built llama.cpp is probed once, on a tiny model, before
any measurement trusts it.

llama.cpp's CPU backend puts a model's weights in "extra" buffer types when the build and the CPU have them: AMX tiles
on Intel Xeons with AMX (Sapphire Rapids and later), repacked interleaved blocks (CPU_REPACK) on others. That is its
fastest path where it works, but it does not work everywhere: 0.3.36 built with GGML_NATIVE segfaults in
`ggml_backend_amx_mul_mat` on some Xeon VMs, on every Q8_0 model. So the harness tries the kernel paths fastest first
(PATHS) on a tiny random-weight model of the same GGUF type, and uses the first one that runs to completion:

  extra-buffers   llama.cpp's default: AMX / repacked weights where the build and the CPU have them
  no-repack       `--no-repack` (llama-completion; llama-bench `--repack 0`; `use_extra_bufts = false` in the scorer):
                  weights stay in the mmap'ed GGUF and every matmul runs the plain CPU kernels

The answer is cached per build, GGUF type, thread count and CPU (`<build>/probe/*.json`); a changed binary or another
CPU probes again. A path that crashed is said once, when probed, and every llama.cpp row carries the chosen path in
its notes with the buffer types the probe run put the weights in (llama.cpp's own `model buffer size` lines, printed
at `-lv 4`: AMX, CPU_REPACK or CPU_Mapped; the timed runs keep llama.cpp's default log level). llama-completion,
llama-bench and the scorer always use the same path.
"""
from __future__ import annotations

import hashlib
import json
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from harness.cache import atomic_file
from harness.host import cpu_flags, cpu_model
from harness.measure.cold import EngineError


@dataclass(frozen=True)
class KernelPath:
    name: str
    describes: str
    completion_args: tuple[str, ...]  # appended to llama-completion's command line
    bench_args: tuple[str, ...]  # appended to llama-bench's
    extra_buffers: bool  # the scorer's llama_model_params.use_extra_bufts


PATHS = (  # fastest first
    KernelPath("extra-buffers", "llama.cpp's default: AMX / repacked weights where the build and CPU have them",
               (), ("--repack", "1"), True),
    KernelPath("no-repack", "--no-repack: weights stay in the mmap'ed GGUF, plain CPU matmul kernels",
               ("--no-repack",), ("--repack", "0"), False),
)
BY_NAME = {p.name: p for p in PATHS}

# A tiny Llama whose matrices are large enough for every kernel family (AMX tiles take K % 32 == 0, N % 16 == 0;
# repacking interleaves 4 or 8 rows), with the default model's tokenizer so that llama.cpp's converter takes it.
PROBE_ARCHITECTURE = dict(hidden_size=256, intermediate_size=768, num_hidden_layers=2, num_attention_heads=4,
                          num_key_value_heads=2, head_dim=64, vocab_size=49152, max_position_embeddings=512,
                          tie_word_embeddings=True)
PROBE_PROMPT = "The quick brown fox jumps over the lazy dog. " * 6  # ~60 tokens: a batched prefill, then decode
PROBE_NEW_TOKENS = 4
PROBE_TIMEOUT_S = 120.0
_BUFFER = re.compile(r"load_tensors:\s+(\S+) model buffer size\s*=\s*([\d.]+) MiB")


@dataclass
class ProbeResult:
    path: KernelPath
    tried: list[dict]  # per path tried, in order: {"path", "ok", "exit", "what", "stderr_tail"}
    cached: bool = False

    def note(self) -> str:
        """One line for every row: the path used and, when a faster one was refused, why."""
        failed = [t for t in self.tried if not t["ok"]]
        why = "; ".join(f"{t['path']} {t['what']}" for t in failed)
        chosen = next(t for t in self.tried if t["path"] == self.path.name)
        return (f"llama.cpp kernel path: {self.path.name} ({self.path.describes}; probe {chosen['what']})"
                + (f"; probed on a tiny model, faster paths failed on this host: {why}" if failed else ""))


def weight_buffers(stderr: str) -> str:
    """The buffer types llama.cpp put the weights in, from its `load_tensors: <type> model buffer size` lines, e.g.
    "AMX 98.2 MiB, CPU_Mapped 27.0 MiB"; "not reported" when it printed none."""
    found = [f"{name} {float(mib):.1f} MiB" for name, mib in _BUFFER.findall(stderr)]
    return ", ".join(found) or "not reported"


def host_fingerprint() -> str:
    """The CPU model and feature flags (what decides which kernels a native build runs)."""
    return f"{cpu_model()}|{' '.join(sorted(cpu_flags()))}"


def probe_completion(binary: str | Path, gguf: str | Path, threads: int, cache: Path,
                     timeout_s: float = PROBE_TIMEOUT_S) -> ProbeResult:
    """The fastest path (PATHS order) on which `binary` (llama-completion) runs the tiny model `gguf` to the end;
    cached in `cache` (a JSON file) for this binary, model, thread count and CPU. Raises EngineError naming every
    failure when no path works."""
    binary = Path(binary)
    key = _cache_key(binary, Path(gguf), threads)
    if cache.is_file():
        try:
            saved = json.loads(cache.read_text())
            if saved.get("key") == key and saved.get("path") in BY_NAME:
                return ProbeResult(BY_NAME[saved["path"]], saved["tried"], cached=True)
        except (ValueError, KeyError):
            pass  # an unreadable cache is probed again
    tried = []
    for path in PATHS:
        outcome = _try(binary, gguf, threads, path, timeout_s)
        tried.append(outcome)
        if outcome["ok"]:
            result = ProbeResult(path, tried)
            if len(tried) > 1:
                print(f"[edgeflow-bench] {result.note()}", file=sys.stderr, flush=True)
            with atomic_file(cache) as tmp:
                tmp.write_text(json.dumps({"key": key, "path": path.name, "tried": tried}, indent=1))
            return result
    raise EngineError(f"llama.cpp ({binary}) fails on this host in every kernel path: "
                      + "; ".join(f"{t['path']}: {t['what']}" for t in tried),
                      "\n".join(t["stderr_tail"] for t in tried).encode())


def _try(binary: Path, gguf, threads: int, path: KernelPath, timeout_s: float) -> dict:
    cmd = [str(binary), "-m", str(gguf), "-p", PROBE_PROMPT, "-n", str(PROBE_NEW_TOKENS), "--no-warmup", "-no-cnv",
           "--no-display-prompt", "-fit", "off", "--ignore-eos", "-c", "256", "-b", "256", "-ub", "256",
           "-t", str(threads), "-tb", str(threads), "-lv", "4", *path.completion_args]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=timeout_s,
                             stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return {"path": path.name, "ok": False, "exit": None, "what": f"hung (no exit in {timeout_s:.0f} s)",
                "stderr_tail": ""}
    if res.returncode < 0:
        what = f"crashed ({signal.Signals(-res.returncode).name})"
    elif res.returncode:
        what = f"exited with status {res.returncode}"
    elif "prompt eval time" not in res.stderr:
        what = "exited 0 without finishing the prompt (no 'prompt eval time' line)"
    else:
        what = f"ran (weights in {weight_buffers(res.stderr)})"
    ok = what.startswith("ran")
    return {"path": path.name, "ok": ok, "exit": res.returncode, "what": what,
            "stderr_tail": "" if ok else res.stderr[-1500:]}


def _cache_key(binary: Path, gguf: Path, threads: int) -> str:
    st = binary.stat()
    fields = [str(binary.resolve()), str(st.st_size), str(st.st_mtime_ns), str(gguf), str(threads),
              host_fingerprint(), " ".join(p.name for p in PATHS)]
    return hashlib.sha256("\n".join(fields).encode()).hexdigest()[:16]


def kernel_path(tools: dict, version: str, gguf_type: str, threads: int) -> ProbeResult:
    """The probed path of this llama.cpp build (`tools`: build_tools' {tool: binary}) for `gguf_type` weights on
    `threads` threads; builds the tiny probe model's GGUF once."""
    from harness.models.zoo import ModelSpec, checkpoint_dir
    from harness.systems import llamacpp_build as build

    spec = ModelSpec(name="llamacpp-probe-tiny", source="random", architecture=PROBE_ARCHITECTURE,
                     note="random weights, only to probe llama.cpp's kernels")
    gguf = build.model_gguf(checkpoint_dir(spec), spec.name, gguf_type, version)
    completion = Path(tools["llama-completion"])
    cache = completion.parent.parent / "probe" / f"{gguf_type}-t{threads}.json"
    return probe_completion(completion, gguf, threads, cache)
