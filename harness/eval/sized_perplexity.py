"""Perplexity sized by the interval it must reach, with no window scored twice.

Methods are compared on the same windows of the same text, so what the tables need is the per-window NLL difference
from FP16, paired by window: text-to-text variation (most of the spread of absolute perplexities) cancels, and a few
windows pin the difference down as well as 64 pin down an absolute perplexity. `sized_windows` adds windows in
batches, in stream order (so any two runs share their first windows), until the 95% t-interval of the mean
difference is within ±`halfwidth` nats, or within `relative` x |mean| (a large difference known to 10%), or the
stream runs out. Every window's NLL is kept on disk per (model, what scored it, text, window size) by
`WindowCache`, so FP16's windows are scored once for all methods and a rerun with a tighter target only adds windows.

    cache = WindowCache.for_scorer("smollm2-135m", "fp16", ids, 2048)
    nll = cache.scorer(lambda i: window_nll(model, ids, 2048, i))
    result = sized_windows(q_nll, fp_nll, available=64, sizing=Sizing(halfwidth=0.003))
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch

from harness.cache import atomic_file, cache_dir, exclusive
from harness.eval.intervals import mean_ci95


def mean_interval(values: list[float]) -> tuple[float, float]:
    """(mean, half-width of its 95% t-interval); the half-width is inf for fewer than two values (nothing is known
    yet: sizing goes on)."""
    mean, half = mean_ci95(values)
    return mean, math.inf if len(values) < 2 else half


@dataclass(frozen=True)
class Sizing:
    halfwidth: float  # nats: enough once the mean difference's 95% half-width is within this
    relative: float = 0.1  # ... or within this fraction of |mean difference|
    min_windows: int = 8
    batch: int = 8

    def __post_init__(self):
        if not (self.halfwidth > 0 and 0 <= self.relative < 1 and self.min_windows >= 2 and self.batch >= 1):
            raise ValueError(f"bad perplexity sizing {self}: halfwidth > 0, 0 <= relative < 1, min_windows >= 2, "
                             f"batch >= 1")

    def enough(self, windows: int, mean: float, half: float) -> bool:
        """Whether `windows` paired differences of this mean and 95% half-width suffice."""
        return windows >= self.min_windows and (half <= self.halfwidth or half <= self.relative * abs(mean))


@dataclass
class SizedResult:
    nlls: list[float]  # the method's NLL per window, windows 0 .. n-1
    ref_nlls: list[float]  # the reference's on the same windows
    reason: str  # why it stopped

    @property
    def diffs(self) -> list[float]:
        return [a - b for a, b in zip(self.nlls, self.ref_nlls)]


def sized_windows(score: Callable[[int], float], reference: Callable[[int], float], available: int,
                  sizing: Sizing, progress: Callable[[str], None] | None = None) -> SizedResult:
    """Windows 0, 1, ... scored by both until `sizing` is satisfied or `available` run out."""
    if available < 1:
        raise ValueError(f"no window to score (available={available})")
    result = SizedResult([], [], "")
    while len(result.nlls) < available:
        n = len(result.nlls)
        for i in range(n, min(available, n + sizing.batch if n else sizing.min_windows)):
            result.nlls.append(score(i))
            result.ref_nlls.append(reference(i))
        mean, half = mean_interval(result.diffs)
        if progress:
            progress(f"{len(result.nlls)} windows: NLL difference {mean:+.4f} ± {half:.4f} nats")
        if sizing.enough(len(result.nlls), mean, half):
            result.reason = (f"the 95% interval of the NLL difference reached ±{half:.4f} nats "
                             f"(target ±{sizing.halfwidth:g}, or {sizing.relative:.0%} of |mean|)")
            return result
    result.reason = f"every window of the stream used ({available}); interval ±{half:.4f} nats"
    return result


@dataclass
class WindowCache:
    """{window index: NLL} of one scorer on one token stream, in a JSON file (None: kept in memory only)."""

    path: Path | None
    values: dict[int, float] = field(default_factory=dict)
    hits: int = 0
    made: int = 0

    @classmethod
    def for_scorer(cls, model: str, scorer: str, token_ids: torch.Tensor, window: int) -> "WindowCache":
        """`scorer` names what computes the NLLs completely (e.g. "fp16", or a quantized artifact's directory name,
        which carries its config and code digest)."""
        ids = torch.as_tensor(token_ids).to(torch.int64).contiguous().numpy().tobytes()
        text = hashlib.sha256(ids).hexdigest()[:12]
        path = cache_dir("ppl-windows", model) / f"{scorer}-text{text}-w{window}.json"
        cache = cls(path)
        cache.values.update(cache._on_disk())
        return cache

    def scorer(self, compute: Callable[[int], float]) -> Callable[[int], float]:
        def score(i: int) -> float:
            if i in self.values:
                self.hits += 1
                return self.values[i]
            with self._turn():  # parallel jobs that need the same window (FP16's, mostly) score it once
                self.values.update(self._on_disk())
                if i in self.values:
                    self.hits += 1
                    return self.values[i]
                t0 = time.perf_counter()
                self.values[i] = compute(i)
                self.made += 1
                self._save(i, time.perf_counter() - t0)
            return self.values[i]
        return score

    def _turn(self):
        """An exclusive lock beside the cache file, held while one window is scored and saved."""
        return exclusive(self.path.with_name(self.path.name + ".lock")) if self.path else contextlib.nullcontext()

    def _on_disk(self) -> dict[int, float]:
        if self.path is None or not self.path.is_file():
            return {}
        return {int(k): float(v) for k, v in json.loads(self.path.read_text()).items()}

    def _save(self, index: int, seconds: float) -> None:
        """Called under the lock, just after `values` took in the file: they are the file plus this window. The file
        is replaced whole, never half-written."""
        if self.path is None:
            return
        from harness.cache_ledger import cache_made

        with atomic_file(self.path) as tmp:
            tmp.write_text(json.dumps({str(k): v for k, v in self.values.items()}, sort_keys=True))
        cache_made("perplexity window", f"{self.path}#{index}", seconds)

    def note(self) -> str:
        return f"{self.hits} windows from the cache, {self.made} scored"
