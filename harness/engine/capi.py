"""The engine's forward pass in process, through its C ABI (libedgeflow_engine.so, include/edgeflow/engine.h):
score token sequences on exactly the runtime's numerics.

    NativeEngine.open(packed)                 an engine over a packed .efpk file
    NativeEngine.from_artifact(artifact)      an engine over an in-memory quantized artifact
    engine.logits(tokens) / .logprobs(tokens) float32 [T, V] for every position
"""
from __future__ import annotations

import ctypes
import os

import numpy as np
import torch

from harness.artifact import Artifact
from harness.engine.build import build, engine_dir


class _Config(ctypes.Structure):
    _fields_ = [(name, ctypes.c_int32) for name in (
        "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
        "head_dim", "vocab_size", "max_position_embeddings", "tie_word_embeddings")] + [
        ("rms_norm_eps", ctypes.c_float), ("rope_theta", ctypes.c_float)]


_ERR_LEN = 1024
_DTYPES = {torch.int8: "int8", torch.uint8: "uint8", torch.float32: "float32"}


def _load_library() -> ctypes.CDLL:
    build("host", target="edgeflow_engine")
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

