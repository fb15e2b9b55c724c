"""`make bench-paper-shape`: cold TTFT where flash is the limit, the paper's regime: a paper-shaped model (random
weights of Qwen1.5-1.8B's shapes by default) on emulated phone flash (200 MB/s), EdgeFlow beside llama.cpp Q8_0 and
MNN INT8, at 128 and 512 prompt tokens, in one interleaved run.

    python -m harness.bench.paper_shape [--model shape-qwen1.5-1.8b] [--bits 4,5] [--prompt-tokens 128,512]
                                        [--mbps 200] [--reps 3]

EdgeFlow runs twice per budget: with its LM head inside the bit budget (quantizer.lm_head=budget; docs/quantizers.md
"The LM head") and with the 8-bit table (lm_head=table, the default), so the bytes the head costs are measured, not
estimated. Per engine it prints TTFT median (min..max), the ratio to
llama.cpp with its spread, and the bytes each run read (blkio's count for the process); per EdgeFlow entry also its
I/O floor, bytes read / flash rate, and how far above it the TTFT is. Every engine gets the same work (ids, context,
threads, spawn -> first token, files evicted and verified: harness/measure/workload.py); rounds are interleaved in a
balanced order (harness/measure/compare.py). Accuracy of random weights means nothing: this measures bytes and time.
"""
from __future__ import annotations

import argparse
import statistics

from harness.bench.record import BenchRecorder
from harness.bench.runtime import breakdown, prompt_ids
from harness.runner.store import ResultsStore

HEADS = {"budget": "LM head in budget", "table": "8-bit LM head"}


def edgeflow_entry(spec, bits: int, lm_head: str, threads: int, device):
    """(label, EdgeFlow system, Prepared) for the artifact at `bits` with quantizer.lm_head=`lm_head` (quantized and
    packed on first use, then cached)."""
    from harness.systems import SystemConfig, get_system

    system = get_system(SystemConfig(name="edgeflow", threads=threads))
    system.quantizer = {"name": "edgeflow", "lm_head": lm_head}
    return f"EdgeFlow {bits} bits, {HEADS[lm_head]}", system, system.prepare(spec, bits, device)


def baseline_entries(spec, threads: int, device) -> list[tuple]:
    """(label, system, Prepared) of every baseline that runs here; the others say why not."""
    from harness.systems import NotRun, SystemConfig, get_system
    from harness.systems.base import baselines

    out = []
    for name in baselines():
        system = get_system(SystemConfig(name=name, threads=threads))
        try:
            out.append((name, system, system.prepare(spec, 8, device)))
        except NotRun as e:
            print(f"{name}: not run: {e}")
    return out


def io_floor_line(entry, mbps: float) -> str:
    """Bytes read per run and the I/O floor they set at the emulated rate, against the TTFT."""
    read = entry.values("bytes_read_mb")
    if not read:
        return "bytes read: not known on this device"
    floor = statistics.median(read) / mbps
    over = [t / (r / mbps) for t, r in zip(entry.values("ttft_s"), read) if r]
    return (f"read {statistics.median(read):.0f} MB per run; I/O floor {floor:.2f} s at {mbps:g} MB/s; "
            f"TTFT / floor {statistics.median(over):.2f} ({min(over):.2f}..{max(over):.2f})")


def main() -> None:
    from harness.devices import get_device
    from harness.measure.compare import Entry, print_comparison, run_interleaved
    from harness.measure.workload import Workload
    from harness.models.zoo import load_model_spec

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="shape-qwen1.5-1.8b")
    ap.add_argument("--bits", default="4,5", help="EdgeFlow bit budgets")
    ap.add_argument("--prompt-tokens", default="128,512")
    ap.add_argument("--mbps", type=float, default=200.0, help="emulated flash read rate (MB/s)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--results", default=None, help="results store root (default results/runs)")
    a = ap.parse_args()
    recorder = BenchRecorder("paper-shape", {k: v for k, v in vars(a).items() if k != "results"},
                             ResultsStore(a.results))
    spec = load_model_spec(a.model)
    device = get_device({"name": "local", "flash_read_mbps": a.mbps})
    try:
        found = baseline_entries(spec, a.threads, device)
        found += [edgeflow_entry(spec, int(b), head, a.threads, device)
                  for b in a.bits.split(",") for head in HEADS]
        for n in map(int, a.prompt_tokens.split(",")):
            work = Workload.for_request(prompt_ids(spec, n), a.threads)
            entries = [Entry(label, system, prepared, device) for label, system, prepared in found]
            print(f"\n=== {a.model}, {n} prompt tokens, emulated flash {a.mbps:g} MB/s; load average "
                  f"{open('/proc/loadavg').read().split()[:3]} ===")
            run_interleaved(entries, work, a.reps)
            reference = entries[0].label if found and found[0][1].own_quantizer is None else None  # 1st baseline
            print_comparison(entries, reference=reference, extra={
                e.label: f"{io_floor_line(e, a.mbps)}\n    {breakdown(e)}" for e in entries})
            recorder.add_comparison(entries, reference, prompt_tokens=n, flash_emulated_mbps=a.mbps,
                                    label="emulated")
    finally:
        device.close()
    recorder.save()


if __name__ == "__main__":
    main()
