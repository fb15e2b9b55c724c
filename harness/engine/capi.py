"""The engine's forward pass in process, through its C ABI (libedgeflow.so, include/edgeflow/engine.h):
score token sequences on exactly the runtime's numerics.

    NativeEngine.open(packed)                 an engine over a packed .efpk file
    NativeEngine.from_artifact(artifact)      an engine over an in-memory quantized artifact
    engine.logits(tokens) / .logprobs(tokens) float32 [T, V] for every position ([last, V] with last=)
    engine.logprobs_after(prefix, tails)      continuations that share a prefix, the prefix run once
"""
from __future__ import annotations

import ctypes
import os

import numpy as np
import torch

from harness.artifact import Artifact
from harness.engine.build import NativeError
from harness.engine.library import EngineConfig, check, last_error, lib
from harness.engine.run import DEFAULT_CHUNK, DEFAULT_POLICY, DEFAULT_STEAL_THRESHOLD, DEFAULT_THREADS
from harness.models import arch


_DTYPES = {torch.int8: "int8", torch.uint8: "uint8", torch.float32: "float32"}


class NativeEngine:
    """The runtime's forward pass, in process. Scoring runs a fresh prefill over the given ids each call, except
    logits(keep=...) and logprobs_after, which continue the previous call's KV cache."""

    def __init__(self, handle: int):
        self._h = handle
        self.vocab_size = lib().ef_engine_vocab_size(handle)

    @classmethod
    def open(cls, packed: str | os.PathLike, *, threads: int = DEFAULT_THREADS, ctx: int = 0,
             chunk: int = DEFAULT_CHUNK) -> "NativeEngine":
        h = lib().ef_engine_open(str(packed).encode(), threads, ctx, chunk)
        if not h:
            raise NativeError(f"cannot open {packed}: {last_error()}")
        return cls(h)

    @classmethod
    def from_artifact(cls, artifact: Artifact, *, threads: int = DEFAULT_THREADS, ctx: int = 0,
             chunk: int = DEFAULT_CHUNK, numerics: str = "npu") -> "NativeEngine":
        """The artifact in an in-memory engine; numerics "npu" (requantized outputs where the artifact has output
        grids, as an NPU computes them) or "cpu-float" (float outputs: a CPU-only system)."""
        if numerics not in ("npu", "cpu-float"):
            raise ValueError(f"numerics must be npu or cpu-float, got {numerics!r}")
        if artifact.manifest.get("runtime_compatible") is False:
            raise RuntimeError("artifact is not runtime-compatible: "
                               + str(artifact.manifest.get("runtime_incompatible_reason", "no reason given")))
        cfg = EngineConfig(**arch.complete(artifact.config, "artifact config"))
        engine = cls(check(lib().ef_engine_new(ctypes.byref(cfg), threads, ctx, chunk)))
        if numerics == "cpu-float":
            check(lib().ef_engine_set_float_outputs(engine._h, 1))
        for name, t in artifact.tensors().items():
            t = t.detach().contiguous()
            if t.dtype not in _DTYPES:
                raise RuntimeError(f"{name}: dtype {t.dtype} is not supported by the runtime")
            shape = (ctypes.c_int64 * max(1, t.dim()))(*t.shape)
            if lib().ef_engine_set_tensor(engine._h, name.encode(), _DTYPES[t.dtype].encode(), shape, t.dim(),
                                          ctypes.c_void_p(t.data_ptr())) != 0:
                engine.close()
                raise NativeError(last_error())
        return engine

    def set_schedule(self, policy: str = DEFAULT_POLICY, *, accel_threads: int = 0,
                     steal_threshold: int = DEFAULT_STEAL_THRESHOLD,
                     lane_help: bool = True) -> "NativeEngine":
        """The pipeline policy and lane split (conf/pipeline/, edgeflow-run --policy); before or between scores."""
        check(lib().ef_engine_set_schedule(self._h, policy.encode(), accel_threads, steal_threshold, int(lane_help)),
              ValueError)
        return self

    def logits(self, tokens: list[int] | torch.Tensor, last: int | None = None, *, keep: int = 0,
               reserve: int = 0) -> torch.Tensor:
        """float32 [last, V] (default [T, V]): the logits after each of the last `last` positions of `tokens`. With
        keep > 0, `tokens` continue the previous call's first `keep` positions (its KV cache; the head of every
        row before is neither recomputed nor returned); `reserve` sizes a fresh sequence's cache for such calls."""
        ids = np.ascontiguousarray(np.asarray(tokens, dtype=np.int32).reshape(-1))
        last = ids.size if last is None else last
        out = np.empty((max(last, 0), self.vocab_size), dtype=np.float32)
        check(lib().ef_engine_score_after(self._h, keep, ids.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)), ids.size,
                                          reserve, last, out.ctypes.data_as(ctypes.POINTER(ctypes.c_float))))
        return torch.from_numpy(out)

    def logprobs(self, tokens: list[int] | torch.Tensor, last: int | None = None) -> torch.Tensor:
        """float32 [last, V] (default [T, V]): log-softmax of logits(tokens, last), the scorer interface of
        harness/eval/scorer_lm.py."""
        return torch.log_softmax(self.logits(tokens, last), dim=-1)

    def logprobs_after(self, prefix: list[int], tails: list[list[int]]) -> list[torch.Tensor]:
        """float32 [1 + len(tail), V] per tail: the distribution after the prefix's last token, then after each of
        the tail's tokens (harness/eval/scorer_lm.py's shared-prefix interface): the prefix runs once, then every
        non-empty tail in one pass as sibling branches of it. The same numbers as logprobs(prefix + tail,
        1 + len(tail)) for each tail."""
        first = torch.log_softmax(self.logits(prefix, 1, reserve=max(map(len, tails))), dim=-1)
        branches = [t for t in tails if t]
        rows = iter(self.branch_logits(len(prefix), branches).split([len(t) for t in branches]))
        return [torch.cat([first, torch.log_softmax(next(rows), dim=-1)]) if t else first for t in tails]

    def branch_logits(self, keep: int, branches: list[list[int]]) -> torch.Tensor:
        """float32 [sum of lengths, V]: the logits after every token of every branch, each branch continuing the
        previous call's first `keep` positions and seeing only them and itself (ef_engine_score_branches); row for
        row logits(branch, keep=keep) of each branch alone. Afterwards the sequence is those `keep` positions."""
        if not branches:
            return torch.empty((0, self.vocab_size))
        ids = np.ascontiguousarray(np.concatenate([np.asarray(b, dtype=np.int32).reshape(-1) for b in branches]))
        lengths = np.asarray([len(b) for b in branches], dtype=np.int32)
        out = np.empty((ids.size, self.vocab_size), dtype=np.float32)
        i32 = ctypes.POINTER(ctypes.c_int32)
        check(lib().ef_engine_score_branches(self._h, keep, ids.ctypes.data_as(i32), lengths.ctypes.data_as(i32),
                                             len(branches), out.ctypes.data_as(ctypes.POINTER(ctypes.c_float))))
        return torch.from_numpy(out)

    def close(self) -> None:
        if self._h:
            lib().ef_engine_free(self._h)
            self._h = None

    def __enter__(self) -> "NativeEngine":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        self.close()


def gemm_kernel() -> str:
    """The INT8 GEMM kernel the runtime uses on this CPU ("avx2", "neon-sdot", ...)."""
    return lib().ef_engine_gemm_kernel().decode()



def accel_linear(x: torch.Tensor, codes: torch.Tensor, w_scale: torch.Tensor, in_scale: torch.Tensor,
                 act_scale: float, out_step: torch.Tensor | None = None, act_bits: int = 8) -> torch.Tensor:
    """float32 [T, C]: one linear as the runtime's accelerator lane computes it for x float32 [T, K] and codes int8
    [C, K]: its activation quantization at act_bits, this CPU's kernel, its requantization to the output grid
    out_step [C] (None: float outputs) and the CPU side's dequantization (docs/quantized-artifact.md)."""
    x = np.ascontiguousarray(x.detach().float().numpy())
    codes = np.ascontiguousarray(codes.numpy().astype(np.int8, copy=False))
    w_scale = np.ascontiguousarray(w_scale.float().numpy())
    in_scale = np.ascontiguousarray(in_scale.float().numpy())
    steps = None if out_step is None else np.ascontiguousarray(out_step.float().numpy())
    (t, k), c = x.shape, codes.shape[0]
    y = np.empty((t, c), dtype=np.float32)
    check(lib().ef_accel_linear(t, c, k, x.ctypes.data, codes.ctypes.data, w_scale.ctypes.data, in_scale.ctypes.data,
                                float(act_scale), None if steps is None else steps.ctypes.data, int(act_bits),
                                y.ctypes.data), ValueError)
    return torch.from_numpy(y)
