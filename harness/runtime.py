"""The native runtime (edgeflow_runtime/) from Python: build it, run `edgeflow-run` cold on a packed file and read
its JSON report, and score token sequences on the runtime's own numerics through its C ABI (ctypes).

    build_runtime()                           incremental build (harness.native), returns the build dir
    run_edgeflow(packed, tokens, ...)         one edgeflow-run process -> RunReport (TTFT and its breakdown, ...)
    NativeEngine.from_artifact(artifact)      an engine over an in-memory quantized artifact
    NativeEngine.open(packed)                 an engine over a packed file
    engine.logits(tokens) / .logprobs(tokens) float32 [T, V] for every position

Exit codes of edgeflow-run are documented in `edgeflow-run --help` and mapped to messages in EXIT_CODES.
"""
from __future__ import annotations

import ctypes
import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from harness import native
from harness.artifact import Artifact

REPO = Path(__file__).resolve().parent.parent
RUNTIME_SRC = REPO / "edgeflow_runtime"

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


# AddressSanitizer + UndefinedBehaviorSanitizer build (make test-sanitize), beside harness.native's host/aarch64/fuzz.
native.BUILDS.setdefault("sanitize", (RUNTIME_SRC / "build-sanitize", [
    "-DCMAKE_BUILD_TYPE=RelWithDebInfo", "-DEDGEFLOW_SHARED=OFF", "-DEDGEFLOW_BENCH=OFF",
    "-DCMAKE_CXX_FLAGS=-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"]))


def build_runtime(name: str = "host") -> Path:
    """Builds edgeflow_runtime (harness.native.build: incremental, locked); returns the build directory."""
    if name not in native.BUILDS:
        raise ValueError(f"unknown runtime build {name!r}; choose one of {sorted(native.BUILDS)}")
    return native.build(name)


def engine_dir(name: str = "host") -> Path:
    """Where a build's engine binaries are (edgeflow-run, edgeflow-bench-int8, libedgeflow_engine.so)."""
    return native.BUILDS[name][0] / "src" / "engine"


@dataclass
class RunReport:
    """edgeflow-run --json, as parsed. Times in seconds; `raw` keeps every field."""

    ttft_s: float
    breakdown_s: dict[str, float]  # setup, io, unpack, compute, idle (they add up to ttft_s)
    bytes_read: int
    peak_rss_bytes: int
    tokens: list[int]
    raw: dict = field(repr=False)


def run_edgeflow(packed: str | os.PathLike, tokens: list[int], *, threads: int = 2, chunk: int = 128,
                 new_tokens: int = 0, evict_cache: bool = False, trace: str | os.PathLike | None = None,
                 extra_args: tuple[str, ...] = (), binary: str | os.PathLike | None = None,
                 timeout: float | None = 600) -> RunReport:
    """Runs one cold inference: edgeflow-run --json with the prompt ids on stdin."""
    exe = Path(binary) if binary else engine_dir() / "edgeflow-run"
    if binary is None:
        build_runtime()
    args = [str(exe), str(packed), "--json", "--threads", str(threads), "--chunk", str(chunk),
            "--new-tokens", str(new_tokens), *extra_args]
    if evict_cache:
        args.append("--evict-cache")
    if trace is not None:
        args += ["--trace", str(trace)]
    proc = subprocess.run(args, input=" ".join(map(str, tokens)), capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeRunError(proc.returncode, proc.stderr)
    raw = json.loads(proc.stdout)
    return RunReport(ttft_s=raw["ttft_s"], breakdown_s=raw["ttft_breakdown_s"], bytes_read=raw["bytes_read"],
                     peak_rss_bytes=raw["peak_rss_bytes"], tokens=raw["tokens"], raw=raw)


class _Config(ctypes.Structure):
    _fields_ = [(name, ctypes.c_int32) for name in (
        "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
        "head_dim", "vocab_size", "max_position_embeddings", "tie_word_embeddings")] + [
        ("rms_norm_eps", ctypes.c_float), ("rope_theta", ctypes.c_float)]


_ERR_LEN = 1024
_DTYPES = {torch.int8: "int8", torch.uint8: "uint8", torch.float32: "float32"}


def _load_library() -> ctypes.CDLL:
    build_runtime()
    lib = ctypes.CDLL(str(engine_dir() / "libedgeflow_engine.so"))
    vp, i32, cp = ctypes.c_void_p, ctypes.c_int32, ctypes.c_char_p
    lib.ef_engine_open.argtypes = [cp, i32, i32, i32, cp, ctypes.c_size_t]
    lib.ef_engine_open.restype = vp
    lib.ef_engine_new.argtypes = [ctypes.POINTER(_Config), i32, i32, i32, cp, ctypes.c_size_t]
    lib.ef_engine_new.restype = vp
    lib.ef_engine_set_tensor.argtypes = [vp, cp, cp, ctypes.POINTER(ctypes.c_int64), i32, vp, cp, ctypes.c_size_t]
    lib.ef_engine_set_tensor.restype = i32
    lib.ef_engine_score.argtypes = [vp, ctypes.POINTER(ctypes.c_int32), i32, ctypes.POINTER(ctypes.c_float), cp,
                                    ctypes.c_size_t]
    lib.ef_engine_score.restype = i32
    lib.ef_engine_set_schedule.argtypes = [vp, cp, i32, i32, i32, cp, ctypes.c_size_t]
    lib.ef_engine_set_schedule.restype = i32
    lib.ef_engine_vocab_size.argtypes = [vp]
    lib.ef_engine_vocab_size.restype = i32
    lib.ef_engine_gemm_kernel.restype = cp
    lib.ef_engine_free.argtypes = [vp]
    return lib


_lib: ctypes.CDLL | None = None


def _library() -> ctypes.CDLL:
    global _lib
    if _lib is None:
        _lib = _load_library()
    return _lib


class NativeEngine:
    """The runtime's forward pass, in process. Scoring runs a fresh prefill over the given ids each call."""

    def __init__(self, handle: int):
        self._h = handle
        self.vocab_size = _library().ef_engine_vocab_size(handle)

    @classmethod
    def open(cls, packed: str | os.PathLike, *, threads: int = 2, ctx: int = 0, chunk: int = 128) -> "NativeEngine":
        err = ctypes.create_string_buffer(_ERR_LEN)
        h = _library().ef_engine_open(str(packed).encode(), threads, ctx, chunk, err, _ERR_LEN)
        if not h:
            raise RuntimeError(f"cannot open {packed}: {err.value.decode()}")
        return cls(h)

    @classmethod
    def from_artifact(cls, artifact: Artifact, *, threads: int = 2, ctx: int = 0, chunk: int = 128) -> "NativeEngine":
        if artifact.manifest.get("runtime_compatible") is False:
            raise RuntimeError("artifact is not runtime-compatible: "
                               + str(artifact.manifest.get("runtime_incompatible_reason", "no reason given")))
        lib = _library()
        c = artifact.config
        cfg = _Config(
            hidden_size=c["hidden_size"], intermediate_size=c["intermediate_size"],
            num_hidden_layers=c["num_hidden_layers"], num_attention_heads=c["num_attention_heads"],
            num_key_value_heads=c["num_key_value_heads"],
            head_dim=c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"],
            vocab_size=c["vocab_size"], max_position_embeddings=c.get("max_position_embeddings", 2048),
            tie_word_embeddings=int(bool(c.get("tie_word_embeddings", False))),
            rms_norm_eps=c.get("rms_norm_eps", 1e-6), rope_theta=c.get("rope_theta", 10000.0))
        err = ctypes.create_string_buffer(_ERR_LEN)
        h = lib.ef_engine_new(ctypes.byref(cfg), threads, ctx, chunk, err, _ERR_LEN)
        if not h:
            raise RuntimeError(f"cannot create engine: {err.value.decode()}")
        engine = cls(h)
        for name, t in artifact.tensors().items():
            t = t.detach().contiguous()
            if t.dtype not in _DTYPES:
                raise RuntimeError(f"{name}: dtype {t.dtype} is not supported by the runtime")
            shape = (ctypes.c_int64 * max(1, t.dim()))(*t.shape)
            if lib.ef_engine_set_tensor(h, name.encode(), _DTYPES[t.dtype].encode(), shape, t.dim(),
                                        ctypes.c_void_p(t.data_ptr()), err, _ERR_LEN) != 0:
                engine.close()
                raise RuntimeError(err.value.decode())
        return engine

    def set_schedule(self, policy: str = "place+priority+steal", *, accel_threads: int = 0, steal_threshold: int = 5,
                     lane_help: bool = True) -> "NativeEngine":
        """The pipeline policy and lane split (conf/pipeline/, edgeflow-run --policy); before or between scores."""
        err = ctypes.create_string_buffer(_ERR_LEN)
        if _library().ef_engine_set_schedule(self._h, policy.encode(), accel_threads, steal_threshold, int(lane_help),
                                             err, _ERR_LEN) != 0:
            raise ValueError(err.value.decode())
        return self

    def logits(self, tokens: list[int] | torch.Tensor) -> torch.Tensor:
        """float32 [T, V]: the logits after each position of `tokens`."""
        ids = np.ascontiguousarray(np.asarray(tokens, dtype=np.int32).reshape(-1))
        out = np.empty((ids.size, self.vocab_size), dtype=np.float32)
        err = ctypes.create_string_buffer(_ERR_LEN)
        rc = _library().ef_engine_score(self._h, ids.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)), ids.size,
                                        out.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), err, _ERR_LEN)
        if rc != 0:
            raise RuntimeError(err.value.decode())
        return torch.from_numpy(out)

    def logprobs(self, tokens: list[int] | torch.Tensor) -> torch.Tensor:
        """float32 [T, V]: log-softmax of logits(tokens)."""
        return torch.log_softmax(self.logits(tokens), dim=-1)

    def close(self) -> None:
        if self._h:
            _library().ef_engine_free(self._h)
            self._h = None

    def __enter__(self) -> "NativeEngine":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        self.close()


def gemm_kernel() -> str:
    """The INT8 GEMM kernel the runtime uses on this CPU ("avx2", "neon-sdot", ...)."""
    return _library().ef_engine_gemm_kernel().decode()


if __name__ == "__main__":  # python -m harness.runtime sanitize: build with ASan/UBSan and run the C++ tests
    import sys

    if sys.argv[1:] != ["sanitize"]:
        sys.exit("usage: python -m harness.runtime sanitize")
    print(native.ctest("sanitize")[-3000:])
