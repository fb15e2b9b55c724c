"""Cold and warm prefill per pipeline policy, interleaved, on a random-code SmolLM2-shaped packed file.

    python -m harness.bench.pipeline [--tokens 128 512] [--reps 5] [--threads 2] [--baseline OLD_EDGEFLOW_RUN]

Each repetition runs every variant once, in turn (so a busy host slows all alike): a fresh edgeflow-run process with
the packed file evicted (cold TTFT, cold prefill speed, lane bubble rates), then --repeat-prefill 3 from memory (warm
prefill speed, median of 3). `--baseline` adds another build of edgeflow-run (e.g. one from before the compute
scheduler) run with its default schedule; its bubble rates come from its per-lane busy times (busy_s / span, one
dispatcher per lane). Prints one line per (tokens, variant): median and min..max over the repetitions.
"""
from __future__ import annotations

import argparse
import os
import statistics
from pathlib import Path

from harness.engine.run import DEFAULT_CHUNK, DEFAULT_THREADS, POLICIES, run_edgeflow
from harness.bench.record import BenchRecorder
from harness.bench.runtime import synthetic_packed  # random codes at SmolLM2-135M's shapes
from harness.runner.store import ResultsStore


def _run(binary: str, model: Path, tokens: list[int], threads: int, chunk: int, policy: str | None) -> dict:
    return run_edgeflow(model, tokens, threads=threads, chunk=chunk, policy=policy, evict_cache=True,
                        repeat_prefill=3, binary=binary, timeout=1800).raw


def _bubbles(report: dict) -> tuple[float, float]:
    if "lanes" in report:
        return report["lanes"]["cpu"]["bubble_rate"], report["lanes"]["accel"]["bubble_rate"]
    span = report["ttft_s"] - report["ttft_breakdown_s"]["setup"]  # the cold prefill's pipeline
    return 1 - report["busy_s"]["cpu"] / span, 1 - report["busy_s"]["accel"] / span


def _spread(xs: list[float], fmt: str) -> str:
    return f"{fmt.format(statistics.median(xs))} ({fmt.format(min(xs))}..{fmt.format(max(xs))})"


def main(argv: list[str] | None = None) -> None:
    from harness.engine.build import engine_binary

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, nargs="+", default=[128, 512])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=DEFAULT_THREADS)
    ap.add_argument("--chunk", type=int, default=DEFAULT_CHUNK)
    ap.add_argument("--bits", type=int, default=5)
    ap.add_argument("--baseline", help="another edgeflow-run build, run with its own default schedule")
    ap.add_argument("--policies", nargs="+", default=list(POLICIES))
    ap.add_argument("--results", default=None, help="results store root (default results/runs)")
    a = ap.parse_args(argv)
    recorder = BenchRecorder("pipeline", {k: v for k, v in vars(a).items() if k != "results"}, ResultsStore(a.results))
    binary = str(engine_binary("host"))
    model = synthetic_packed(a.bits)
    variants = ([("before", a.baseline, None)] if a.baseline else []) + [(p, binary, p) for p in a.policies]
    print(f"# {os.uname().nodename} threads={a.threads} chunk={a.chunk} model={model.name} "
          f"loadavg at start={os.getloadavg()[0]:.2f}")
    for n in a.tokens:
        prompt = [(i * 7919 + 13) % 49000 + 10 for i in range(n)]
        rows: dict[str, list[dict]] = {name: [] for name, _, _ in variants}
        for _ in range(a.reps):
            for name, exe, policy in variants:
                rows[name].append(_run(exe, model, prompt, a.threads, a.chunk, policy))
        for name, reps in rows.items():
            ttft = [r["ttft_s"] for r in reps]
            cold = [r["cold_prefill_tokens_per_s"] for r in reps]
            warm = [r["warm_prefill_tokens_per_s"] for r in reps]
            cpu_b = [_bubbles(r)[0] for r in reps]
            acc_b = [_bubbles(r)[1] for r in reps]
            stolen = [r.get("lanes", {}).get("cpu", {}).get("stolen", 0) for r in reps]
            for i, r in enumerate(reps):
                for metric, value, unit in (("ttft_s", ttft[i], "s"), ("cpu_bubble_rate", cpu_b[i], "ratio"),
                                            ("accel_bubble_rate", acc_b[i], "ratio"),
                                            ("stolen_tasks", stolen[i], "count")):
                    recorder.add(metric, value, unit, repetition=i, system="edgeflow", bits=a.bits, pipeline=name,
                                 prompt_tokens=n, variant="random codes, engine clock")
            print(f"tokens={n} {name:22s} ttft_s={_spread(ttft, '{:.3f}')} cold_tok/s={_spread(cold, '{:.1f}')} "
                  f"warm_tok/s={_spread(warm, '{:.1f}')} cpu_bubble={_spread(cpu_b, '{:.2f}')} "
                  f"accel_bubble={_spread(acc_b, '{:.2f}')} stolen={statistics.median(stolen):g}")
    print(f"# loadavg at end={os.getloadavg()[0]:.2f}")
    recorder.save()


if __name__ == "__main__":
    main()
