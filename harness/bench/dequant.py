"""`make bench-dequant`: Figure 3 on this host's CPU - a matmul on weights kept in AWQ's and CMPQ's formats and
dequantized into INT8 on every call, against static per-channel INT8 through the portable kernel and through our
best kernel (edgeflow_runtime/src/engine/bench/bench_dequant.cpp says what each variant times).

Shapes: Llama3-8B's q/o projection (4096 x 4096) and gate/up projection (14336 x 4096), as the paper measures two
of its matmuls; T = 128 tokens (our prefill chunk); one thread; random weights with outlier input channels.
Rows go to the results store as experiment `bench-dequant` (harness/bench/record.py): metric `matmul_s` per
variant (opt_int8, int8, awq, cmpq) and `dequant_s` (awq, cmpq), the shape in the `workload` column.
experiments/fig3.py draws them beside the paper's ratios.
"""
from __future__ import annotations

import argparse
import json
import subprocess

from harness.bench.record import BenchRecorder
from harness.engine.build import engine_binary
from harness.runner.store import ResultsStore

SHAPES = ((4096, 4096), (14336, 4096))  # Llama3-8B: (output, input) channels of q/o and gate/up
VARIANTS = ("opt_int8", "int8", "awq", "cmpq")


def run(store: ResultsStore | None = None, shapes=SHAPES, tokens: int = 128, reps: int = 5, group: int = 128) -> dict:
    binary = engine_binary("host", "edgeflow-bench-dequant")
    args = [str(binary), "--tokens", str(tokens), "--group", str(group), "--reps", str(reps)]
    for c, k in shapes:
        args += ["--shape", f"{c}x{k}"]
    print(f"[bench] {' '.join(args)}")
    res = subprocess.run(args, capture_output=True, text=True, timeout=3600)
    if res.returncode != 0:
        raise RuntimeError(f"edgeflow-bench-dequant failed ({res.returncode}): {res.stderr.strip()}")
    report = json.loads(res.stdout)
    rec = BenchRecorder("dequant", {"shapes": [list(s) for s in shapes], "tokens": tokens, "reps": reps,
                                    "group": group}, store)
    for shape in report["shapes"]:
        workload = json.dumps({"C": shape["C"], "K": shape["K"], "tokens": report["tokens"], "threads": 1,
                               "group": report["group"], "kernel": report["kernel"]})
        notes = (f"{shape['C']}x{shape['K']} weights, {report['tokens']} tokens, one thread, median of "
                 f"{report['reps']} calls; best kernel {report['kernel']}")
        for variant in VARIANTS:
            rec.add("matmul_s", shape[f"{variant}_s"], "s", variant=variant, workload=workload, notes=notes,
                    prompt_tokens=report["tokens"])
        for variant in ("awq", "cmpq"):
            rec.add("dequant_s", shape[f"{variant}_dequant_s"], "s", variant=variant, workload=workload, notes=notes,
                    prompt_tokens=report["tokens"])
        print(f"[bench] {shape['C']}x{shape['K']}: " + ", ".join(
            f"{v} {shape[f'{v}_s'] * 1e3:.1f} ms" for v in VARIANTS))
    rec.save()
    return report


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--group", type=int, default=128)
    a = ap.parse_args(argv)
    run(tokens=a.tokens, reps=a.reps, group=a.group)


if __name__ == "__main__":
    main()
