"""A cold-TTFT comparison of engines doing the same work: interleaved runs, the workload check, the printed table.

Used by `make bench-runtime` (harness/bench/runtime.py) and `make bench-baselines` (harness/bench/baselines.py);
the `ttft` experiment runs the same `System.run_cold(prepared, workload, ...)` one system at a time.

`run_interleaved` runs repetition 1 of every entry, then repetition 2, ... (so a change in the shared host's load
touches every entry alike), each repetition one cold run under the shared protocol (harness/measure/cold.py), after
one discarded warm-up round (binaries and libraries into the page cache; model files are evicted before every run).
The order within a round changes from round to round (a Williams design: over n rounds every entry runs right after
every other equally often: once, or twice over 2n rounds for an odd n), because a run pays for the one before it: on an AVX-512 EPYC the same
EdgeFlow file took 1.11 s right after llama.cpp's 960-token run and 0.91 s after another EdgeFlow run (median of 5
rounds, paired difference +0.08..+0.30 s), so a fixed order gave the entry after llama.cpp a penalty none of the
others paid.
Before anything runs, and again on what each system says it ran, the entries' workloads must be identical
(harness.measure.workload.check_same). `print_comparison` prints, per entry, the exact command line, the ISA the
engine reported, the context and threads it ran with, TTFT median (min..max), and the ratio to the reference entry
with its spread: the median and min..max of the per-repetition ratios (runs of one round are adjacent in time).
"""
from __future__ import annotations

import shlex
import statistics
from dataclasses import dataclass, field, replace

from harness.measure.cold import ProtocolConfig
from harness.measure.workload import Workload, check_same


@dataclass
class Entry:
    """One engine configuration of a comparison."""

    label: str
    system: object  # harness.systems.base.System
    prepared: object  # its Prepared
    device: object
    measurements: list = field(default_factory=list)  # one Measurement per measured repetition

    def values(self, metric: str = "ttft_s") -> list[float]:
        return [v for m in self.measurements for v in m.values(metric)]


def balanced_order(n: int, round_: int) -> list[int]:
    """The order of n entries in round `round_`: row round_ of a Williams design, in which over n rounds every entry
    comes right after every other exactly once (for an odd n: twice over 2n rounds). Row 0 is 0, 1, n-1, 2, n-2, ...; row i adds i
    (mod n); an odd n adds the rows reversed."""
    first, lo, hi = [0], 1, n - 1
    while len(first) < n:
        first.append(lo)
        lo += 1
        if len(first) < n:
            first.append(hi)
            hi -= 1
    rows = [[(x + i) % n for x in first] for i in range(n)]
    rows += [row[::-1] for row in rows] if n % 2 else []
    return rows[round_ % len(rows)]


def run_interleaved(entries: list[Entry], work: Workload, reps: int, protocol: ProtocolConfig | None = None,
                    warmup_rounds: int = 1, first_round: int = 0) -> list[Entry]:
    """Every entry, `reps` interleaved cold repetitions of `work` (plus discarded warm-up rounds), each round in its
    balanced_order (`first_round`: the design's row of the first round, for a caller running one round per call)."""
    protocol = replace(protocol or ProtocolConfig(busy_policy="flag"), repetitions=1, warmup_runs=0)
    for e in entries:
        e.system.check_workload(work)  # refuse before the first run, not after a minute of the others
    for round_ in range(warmup_rounds + reps):
        for i in balanced_order(len(entries), first_round + round_):
            e = entries[i]
            m = e.system.run_cold(e.prepared, work, e.device, protocol)
            if round_ >= warmup_rounds:
                e.measurements.append(m)
    check_same({e.label: m.workload for e in entries for m in e.measurements[:1]})
    return entries


def spread(xs: list[float], fmt: str = "{:.3f}") -> str:
    return f"{fmt.format(statistics.median(xs))} ({fmt.format(min(xs))}..{fmt.format(max(xs))})"


def p90_over_median(xs: list[float]) -> float:
    """The 90th percentile (linear interpolation between order statistics) over the median: how far the slow tail
    of the runs reaches; 1.0 for a single run."""
    if len(xs) < 2:
        return 1.0
    return statistics.quantiles(xs, n=10, method="inclusive")[8] / statistics.median(xs)


def paired_ratios(a: list[float], b: list[float]) -> list[float]:
    """a[i] / b[i]: repetition i of two entries ran in the same round."""
    if len(a) != len(b):
        raise ValueError(f"paired ratios need as many repetitions on both sides ({len(a)} vs {len(b)})")
    return [x / y for x, y in zip(a, b)]


def print_comparison(entries: list[Entry], reference: str | None = None, extra: dict | None = None) -> None:
    """The table described in the module docstring; `extra` maps a label to one more text column (e.g. the
    engine's own TTFT breakdown)."""
    work = check_same({e.label: e.measurements[0].workload for e in entries})
    loads = [v for e in entries for v in e.values("load_avg_1m")]
    print(f"workload: {work.n_prompt} prompt tokens (sha256 {work.tokens_digest()}), ctx {work.ctx}, "
          f"{work.threads} threads, timed event {work.timed_event} (spawn -> first generated token on stdout), "
          f"cold state {work.cold}; {len(entries[0].measurements)} interleaved repetitions; "
          f"1-min load average {min(loads):.2f}..{max(loads):.2f}")
    busy = [v for e in entries for v in e.values("host_busy")]
    if any(busy):
        print(f"  WARNING: the host was busy (protocol.busy_signal above its threshold) during {sum(map(bool, busy))} of "
              f"{len(busy)} runs: engines degrade unequally under contention (llama.cpp's OpenMP threads spin), so "
              f"medians and ratios mostly measure the other load; the minima are the least disturbed runs")
    ref = next((e for e in entries if e.label == reference), None)
    for e in entries:
        m = e.measurements[0]
        ttft = e.values("ttft_s")
        ratio = ""
        if ref is not None and e is not ref:
            ratio = f"  ratio to {ref.label}: {spread(paired_ratios(ttft, ref.values('ttft_s')), '{:.2f}')}x"
        gap = [x - t for x, t in zip(e.values("exit_s"), ttft)]
        print(f"\n  {e.label}: TTFT {spread(ttft)} s{ratio}   p90/median {p90_over_median(ttft):.2f}   "
              f"(exit {spread(gap)} s after it)")
        print(f"    threads: {m.engine.get('all_threads', 'not reported')}")
        engine = ", ".join(f"{k} {v}" for k, v in m.engine.items() if k not in ("isa", "features", "all_threads"))
        print(f"    ISA: {m.engine.get('isa', 'not reported')}; engine: {engine}")
        for note in m.notes:
            if "NOT the same" in note:
                print(f"    WARNING: {note}")
        if extra and e.label in extra:
            print(f"    {extra[e.label]}")
        print(f"    command: {shlex.join(m.command)}")
