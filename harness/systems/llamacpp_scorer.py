"""llama.cpp's own forward pass as a scorer (harness/eval/scorer_lm.py): token ids -> log-probabilities, computed by
`edgeflow-llama-scorer` (llamacpp_scorer.cpp, built against the same llama.cpp as the TTFT tools) over the GGUF that
llama.cpp's TTFT loads.

    with LlamaCppScorer.open(gguf, ctx=2048, threads=2) as scorer:
        rows = scorer.logprobs(ids, last=3)     # float32 [3, V]: the distributions after the last 3 positions
        rows = scorer.logits(ids)               # float32 [T, V] log-probabilities of every position
        rows = scorer.logprobs_after(prefix, tails)   # continuations sharing a prefix, the prefix decoded once

One process per scorer; requests go over its stdin/stdout (the protocol is in the C++ file's header). A dead process
or a refused request raises EngineError with the tool's stderr.
"""
from __future__ import annotations

import struct
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import torch

from harness.measure.cold import EngineError

_I32 = struct.Struct("<i")


class LlamaCppScorer:
    def __init__(self, proc: subprocess.Popen, stderr, n_vocab: int, ctx: int):
        self.proc, self._stderr, self.n_vocab, self.ctx = proc, stderr, n_vocab, ctx

    @classmethod
    def open(cls, gguf: str | Path, ctx: int, threads: int, version: str = "0.3.36",
             extra_buffers: bool = True) -> "LlamaCppScorer":
        """`extra_buffers`: the probed kernel path's (harness/systems/llamacpp_probe.py), as llama-completion's."""
        from harness.systems.llamacpp_build import build_scorer

        if not Path(gguf).is_file():
            raise FileNotFoundError(f"llama.cpp scorer: no GGUF at {gguf}")
        binary = build_scorer(version)
        stderr = tempfile.TemporaryFile()
        proc = subprocess.Popen([str(binary), str(gguf), str(int(ctx)), str(int(threads)),
                                 str(int(extra_buffers))], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=stderr)
        scorer = cls(proc, stderr, 0, int(ctx))
        scorer.n_vocab = scorer._read_i32("loading the model")
        return scorer

    def logprobs(self, ids: list[int], last: int) -> torch.Tensor:
        """float32 [last, V]: row j is llama.cpp's log-distribution of the token after position len(ids) - last + j."""
        return self._request(ids, last, keep=0)

    def logprobs_after(self, prefix: list[int], tails: list[list[int]]) -> list[torch.Tensor]:
        """float32 [1 + len(tail), V] per tail: after the prefix's last token, then after each tail token; the prefix
        decoded once and each tail from its KV cache (harness/eval/scorer_lm.py's shared-prefix interface). The
        prefix's last token is decoded again with each tail: in a batch of its own, its row of an F16 model differs
        from scoring from scratch by ~1e-6; with the tail it is the same bits."""
        self._request(prefix, 1, keep=0)
        return [self._request(prefix[-1:] + t, 1 + len(t), keep=len(prefix) - 1) for t in tails]

    def _request(self, ids: list[int], last: int, keep: int) -> torch.Tensor:
        n = len(ids)
        if not 1 <= last <= n:
            raise ValueError(f"need 1 <= last <= len(ids), got last={last}, len(ids)={n}")
        if keep + n > self.ctx:
            raise ValueError(f"{keep} + {n} tokens do not fit the scorer's context of {self.ctx}")
        request = struct.pack("<iii", n, last, keep) + np.asarray(ids, dtype="<i4").tobytes()
        try:
            self.proc.stdin.write(request)
            self.proc.stdin.flush()
        except BrokenPipeError:
            raise self._died("sending a request") from None
        status = self._read_i32("scoring")
        if status != 0:
            raise EngineError(f"llama.cpp scorer refused the request: {self._read(status, 'an error').decode()}")
        raw = self._read(4 * last * self.n_vocab, "log-probabilities")
        return torch.from_numpy(np.frombuffer(raw, dtype="<f4").reshape(last, self.n_vocab).copy())

    def logits(self, ids: list[int]) -> torch.Tensor:
        """Every position's log-probabilities, [T, V] (what fidelity's LogitsModel calls; log_softmax is a no-op)."""
        return self.logprobs(ids, len(ids))

    def _read_i32(self, what: str) -> int:
        return _I32.unpack(self._read(4, what))[0]

    def _read(self, size: int, what: str) -> bytes:
        data = self.proc.stdout.read(size)
        if data is None or len(data) != size:
            raise self._died(what)
        return data

    def _died(self, what: str) -> EngineError:
        code = self.proc.poll()
        if code is None:
            self.proc.kill()
            code = self.proc.wait()
        self._stderr.seek(0)
        tail = self._stderr.read().decode(errors="replace")[-2000:]
        return EngineError(f"llama.cpp scorer exited ({code}) while {what}: {tail.strip() or 'no output'}")

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write(struct.pack("<iii", 0, 0, 0))
                self.proc.stdin.close()
                self.proc.wait(timeout=30)
            except (BrokenPipeError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()
        self._stderr.close()

    def __enter__(self) -> "LlamaCppScorer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
