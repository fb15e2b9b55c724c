"""Perplexity sized by its interval (harness/eval/sized_perplexity.py): windows are added until the NLL difference from
FP16 is known well enough, and no window is scored twice for the same model and text."""
import math
import random
import threading

import pytest
import torch

from harness.eval.intervals import t975
from harness.eval.sized_perplexity import Sizing, WindowCache, mean_interval, sized_windows


def test_t_quantiles_and_interval():
    assert t975(1) == pytest.approx(12.706, abs=1e-3) and t975(30) == pytest.approx(2.042, abs=1e-3)
    assert t975(0) == math.inf and t975(6.5) == pytest.approx(2.402, abs=1e-3)  # Welch's fractional df
    assert t975(31) == pytest.approx(2.0395, abs=2e-4) and t975(120) == pytest.approx(1.9799, abs=2e-4)
    mean, half = mean_interval([1.0, 2.0, 3.0])
    assert mean == 2.0 and half == pytest.approx(4.303 * 1.0 / math.sqrt(3), rel=1e-4)
    assert mean_interval([5.0])[1] == math.inf


def _scorers(offset: float, spread: float, seed: int = 0):
    """A reference whose windows vary a lot (text to text) and a method that adds offset + small per-window noise."""
    rng = random.Random(seed)
    text = [3.0 + rng.gauss(0, 0.5) for _ in range(64)]
    noise = [rng.gauss(0, spread) for _ in range(64)]
    calls = {"ref": 0, "q": 0}

    def ref(i):
        calls["ref"] += 1
        return text[i]

    def q(i):
        calls["q"] += 1
        return text[i] + offset + noise[i]
    return q, ref, calls


def test_a_small_paired_difference_stops_early_a_noisy_one_adds_windows():
    q, ref, calls = _scorers(offset=0.02, spread=0.002)
    got = sized_windows(q, ref, 64, Sizing(halfwidth=0.003))
    assert len(got.nlls) == 8 and calls == {"ref": 8, "q": 8}  # min_windows suffice: text variation cancels
    mean, half = mean_interval(got.diffs)
    assert mean == pytest.approx(0.02, abs=0.003) and half <= 0.003 and "reached" in got.reason
    q, ref, _ = _scorers(offset=0.001, spread=0.01)
    got = sized_windows(q, ref, 64, Sizing(halfwidth=0.003))
    assert 8 < len(got.nlls) <= 64 and len(got.nlls) % 8 == 0
    assert mean_interval(got.diffs)[1] <= 0.003 or len(got.nlls) == 64
    q, ref, _ = _scorers(offset=0.5, spread=0.1)  # a large difference: known to 10% is enough
    got = sized_windows(q, ref, 64, Sizing(halfwidth=1e-4))
    mean, half = mean_interval(got.diffs)
    assert half <= 0.1 * abs(mean) and len(got.nlls) < 64
    got = sized_windows(q, ref, 5, Sizing(halfwidth=1e-6))  # the stream runs out first
    assert len(got.nlls) == 5 and "every window" in got.reason


def test_bad_sizing_is_refused():
    with pytest.raises(ValueError, match="halfwidth > 0"):
        Sizing(halfwidth=0)
    with pytest.raises(ValueError, match="min_windows >= 2"):
        Sizing(halfwidth=0.01, min_windows=1)


def test_window_cache_scores_each_window_once_across_processes(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEFLOW_CACHE", str(tmp_path))
    ids = torch.arange(1000)
    calls = []
    first = WindowCache.for_scorer("m", "fp16", ids, 100)
    score = first.scorer(lambda i: calls.append(i) or float(i) / 10)
    assert [score(i) for i in (0, 1, 0)] == [0.0, 0.1, 0.0] and calls == [0, 1]
    again = WindowCache.for_scorer("m", "fp16", ids, 100)  # another job: reads what the first scored
    score = again.scorer(lambda i: calls.append(i) or float(i) / 10)
    assert [score(i) for i in (0, 1, 2)] == [0.0, 0.1, 0.2] and calls == [0, 1, 2]
    assert again.note() == "2 windows from the cache, 1 scored"
    assert WindowCache.for_scorer("m", "fp16", ids + 1, 100).values == {}  # another text
    assert WindowCache.for_scorer("m", "fp16", ids, 50).values == {}  # another window size
    assert WindowCache.for_scorer("m", "edgeflow-5-abc", ids, 100).values == {}  # another scorer


def test_two_jobs_that_need_the_same_window_at_once_score_it_once(tmp_path, monkeypatch):
    """Two jobs of a parallel sweep, both sized against FP16, reach FP16's window 0 together: the second waits for
    the first and reads its NLL. (Threads stand in for processes: each cache opens its own lock file, and flock locks
    of two open files exclude each other within a process as between processes.)"""
    monkeypatch.setenv("EDGEFLOW_CACHE", str(tmp_path))
    ids = torch.arange(1000)
    first_is_scoring, calls = threading.Event(), []

    def slow_nll(i: int) -> float:
        calls.append(i)
        first_is_scoring.set()
        threading.Event().wait(0.3)  # long enough for the second job to arrive while this one scores
        return 2.5

    first = WindowCache.for_scorer("m", "fp16", ids, 100)
    second = WindowCache.for_scorer("m", "fp16", ids, 100)  # made before the first scored anything
    results = {}
    job = threading.Thread(target=lambda: results.setdefault("first", first.scorer(slow_nll)(0)))
    job.start()
    assert first_is_scoring.wait(10)
    results["second"] = second.scorer(slow_nll)(0)
    job.join()
    assert results == {"first": 2.5, "second": 2.5} and calls == [0]
    assert (first.note(), second.note()) == ("0 windows from the cache, 1 scored", "1 windows from the cache, 0 scored")
