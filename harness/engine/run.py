"""edgeflow-run, the engine's command line: the one place that builds its arguments and reads its JSON report.

    command(binary, packed, tokens, threads=2, ...)   the argument list (systems/edgeflow.py runs it on a device)
    pipeline_args(policy=..., chunk=..., ...)         the scheduling flags (conf/pipeline, PipelineConfig)
    run_edgeflow(packed, tokens, ...)                 one local process -> RunReport
    parse_report(stdout)                              RunReport, or ReportError naming what is wrong
    first_token_seen(stdout_so_far)                   True once the report's first line is out (the TTFT event)

Exit codes of edgeflow-run are documented in `edgeflow-run --help` and mapped to messages in EXIT_CODES.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from harness.engine.build import engine_binary

# The runtime's scheduling policies (edgeflow_runtime/src/engine/README.md, "Policies"; conf/pipeline/<name>.yaml),
# each adding one idea to the one before; the last is EdgeFlow's and the default.
POLICIES = ("llmnpu-static", "place", "place+priority", "place+priority+steal")
DEFAULT_POLICY = POLICIES[-1]
DEFAULT_CHUNK = 128  # prompt tokens per prefill chunk (edgeflow-run --chunk; conf/pipeline/*.yaml chunk)
DEFAULT_THREADS = 2  # an engine's whole compute-thread budget, every system's (conf/system/*.yaml threads)
DEFAULT_STEAL_THRESHOLD = 5  # steal when the accelerator queue holds more tasks (conf/pipeline/*.yaml steal_threshold)
# (the same values as edgeflow_runtime/src/engine/defaults.h: tests/test_defaults.py)


def pool_share_threads(environ=os.environ) -> int:
    """The thread budget of an engine a job opens without a system group (a quantizer scored by our runtime): the
    job's share of the cores when jobs run in a local pool (EDGEFLOW_THREADS, experiments/multirun.py), else
    DEFAULT_THREADS, as conf/system/*.yaml's `threads` resolve. Two pool jobs of 2 spinning threads on 2 cores would
    each wait for the other's."""
    value = environ.get("EDGEFLOW_THREADS") or DEFAULT_THREADS
    try:
        threads = int(value)
    except ValueError:
        threads = 0
    if threads < 1:
        raise ValueError(f"EDGEFLOW_THREADS must be a positive integer, got {value!r}")
    return threads


EXIT_CODES = {
    1: "internal error",
    2: "bad command line or option value",
    3: "a file cannot be opened or read",
    4: "the model file is invalid or corrupt",
    5: "the request does not fit the model",
}


class RuntimeRunError(RuntimeError):
    """edgeflow-run failed; .code is its exit code (EXIT_CODES), the message is its stderr."""

    def __init__(self, code: int, message: str):
        super().__init__(f"edgeflow-run exited with {code} ({EXIT_CODES.get(code, 'unknown')}): {message.strip()}")
        self.code = code


class ReportError(ValueError):
    """edgeflow-run's stdout is not a complete JSON report."""


@dataclass
class RunReport:
    """edgeflow-run --json, as parsed. Times in seconds; `raw` keeps every field (lanes, op_s, decode_s, ...)."""

    ttft_s: float
    breakdown_s: dict[str, float]  # setup, io, unpack, compute, idle (they add up to ttft_s)
    bytes_read: int
    peak_rss_bytes: int
    tokens: list[int]
    raw: dict = field(repr=False)


def parse_report(stdout: str | bytes) -> RunReport:
    try:
        raw = json.loads(stdout)
        return RunReport(ttft_s=raw["ttft_s"], breakdown_s=raw["ttft_breakdown_s"], bytes_read=raw["bytes_read"],
                         peak_rss_bytes=raw["peak_rss_bytes"], tokens=raw["tokens"], raw=raw)
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        tail = stdout[-300:] if stdout else stdout
        raise ReportError(f"edgeflow-run printed something that is not its JSON report ({e}): {tail!r}") from None


def first_token_seen(out: bytes) -> bool:
    """The report's first line, `{"first_token": N,`, is flushed the moment the first token is known."""
    return re.search(rb'"first_token": -?\d+,', out) is not None


def command(binary: str | os.PathLike, packed: str | os.PathLike, tokens: list[int] | None, *, threads: int = DEFAULT_THREADS,
            ctx: int | None = None, new_tokens: int = 0, extra_args: tuple[str, ...] | list[str] = (),
            prompt_text: str | os.PathLike | None = None, verify_crc: bool = True) -> list[str]:
    """edgeflow-run's arguments for one prompt: token ids, or a file of prompt text (`prompt_text`, tokenized by the
    engine with the tokenizer file beside `packed`). --threads is the engine's whole compute budget; --ctx sizes the
    KV cache (None: the prompt plus the new tokens); extra_args carry the pipeline's flags (PipelineConfig.args);
    verify_crc False skips the payloads' CRC checks (--no-verify; a benchmark's variant)."""
    prompt = ["--prompt-text", str(prompt_text)] if prompt_text is not None else \
        ["--tokens", ",".join(map(str, tokens))]
    return [str(binary), str(packed), *prompt, "--threads", str(threads),
            *extra_args, *(["--ctx", str(ctx)] if ctx is not None else []), "--json",
            *(["--new-tokens", str(new_tokens)] if new_tokens else []), *([] if verify_crc else ["--no-verify"])]


def pipeline_args(*, policy: str, accel_threads: int, steal_threshold: int, chunk: int, io_threads: int = 1,
                  lane_help: bool = True) -> list[str]:
    """edgeflow-run's scheduling flags (edgeflow_runtime/src/engine/README.md, "Policies"; conf/pipeline/)."""
    return ["--policy", policy, "--accel-threads", str(accel_threads), "--steal-threshold", str(steal_threshold),
            "--chunk", str(chunk), "--io-threads", str(io_threads), *([] if lane_help else ["--no-lane-help"])]


def run_edgeflow(packed: str | os.PathLike, tokens: list[int], *, threads: int = DEFAULT_THREADS, chunk: int | None = None,
                 policy: str | None = None, ctx: int | None = None, new_tokens: int = 0, evict_cache: bool = False,
                 repeat_prefill: int = 0, profile_ops: str | os.PathLike | None = None,
                 trace: str | os.PathLike | None = None, extra_args: tuple[str, ...] | list[str] = (),
                 binary: str | os.PathLike | None = None, timeout: float | None = 600) -> RunReport:
    """Runs one inference in a local process (cold if evict_cache) and returns its report. `chunk`, `policy` None:
    the engine's own defaults or those in extra_args (pipeline_args); `repeat_prefill` N: N warm prefills after the
    cold one; `profile_ops`: where to write the cost table of every compute task."""
    exe = Path(binary) if binary else engine_binary("host")
    extra = [*(["--chunk", str(chunk)] if chunk is not None else []),
             *(["--policy", policy] if policy is not None else []), *extra_args,
             *(["--evict-cache"] if evict_cache else []),
             *(["--repeat-prefill", str(repeat_prefill)] if repeat_prefill else []),
             *(["--profile-ops", str(profile_ops)] if profile_ops is not None else []),
             *(["--trace", str(trace)] if trace is not None else [])]
    proc = subprocess.run(command(exe, packed, tokens, threads=threads, ctx=ctx, new_tokens=new_tokens,
                                  extra_args=extra), capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeRunError(proc.returncode, proc.stderr)
    return parse_report(proc.stdout)
