"""`make bench-unpack`: bytes on disk, cold load, unpack speed, instructions per weight and end-to-end load+unpack of
every packing layout at average bit-widths 4..7 (paper section 3.2 Figure 4, section 5.4.2 Figure 13).

The model is the default one's shape (SmolLM2-135M: 30 layers, hidden 576, intermediate 1536) with random codes and
the Figure 4a bit mix (bit cost depends on shapes and widths, not on code values). Each layout is packed, then
edgeflow_runtime's bench_unpack measures it (see bench/bench_unpack.cpp for what each mode times):
  unpack  warm unpack of every quantized linear by one thread, median of --reps;
  once    one unpack of --callgrind-layers layers inside valgrind --tool=callgrind: instructions per weight;
  cold    file evicted (posix_fadvise DONTNEED, residency checked with mincore), every layer read by 2 threads;
  e2e     evicted, 2 threads load layers, 1 thread unpacks them in order (the paper's setting); the timeline of
          the median run is kept for Figure 4.
Rows go to the results store as experiment `bench-unpack` (harness/bench/record.py); the summary and the timelines
to unpack.json in that experiment's folder. Figures 13 and 4 (experiments/fig13.py, fig4.py) draw them.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from harness.engine.format import supported_paths
from harness.engine.build import build as build_engine
from harness.artifact import load_artifact
from harness.cache import cache_dir
from harness.pack import LAYOUTS, PackedFile, pack_artifact
from harness.models.zoo import DEFAULT_MODEL, load_model_spec
from harness.pack.synthetic import random_artifact
from harness.bench.record import BenchRecorder
from harness.runner.provenance import git_commit
from harness.runner.store import ResultsStore

TIMELINES = "unpack.json"  # in the store's bench-unpack folder: provenance, summary, per-layer timelines

DEFAULT_CONFIG = load_model_spec(DEFAULT_MODEL).architecture  # SmolLM2-135M's shape
BASELINE_PATH = "auto"  # the baselines have one kernel each (labelled "native" in the rows)


def bench_binary() -> Path:
    return build_engine("host", "bench_unpack") / "bench_unpack"


def run_bench(file: Path, mode: str, **opts) -> dict:
    cmd = [str(bench_binary()), str(file), mode, *(x for k, v in opts.items() for x in (f"--{k.replace('_', '-')}", str(v)))]
    run = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if run.returncode:
        raise RuntimeError(f"{' '.join(cmd)}: {run.stderr.strip()}")
    return json.loads(run.stdout)


def instructions_per_weight(file: Path, path: str, layers: int, workdir: Path) -> float:
    """Instructions executed inside run_once() (the unpack loop) per weight, counted by callgrind."""
    out = workdir / f"callgrind.{os.getpid()}.out"
    cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "--collect-atstart=no",
           "--toggle-collect=*run_once*", str(bench_binary()), str(file), "once", "--path", path, "--layers", str(layers)]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode:
        raise RuntimeError(f"callgrind failed: {run.stderr[-2000:]}")
    weights = json.loads(run.stdout)["weights"]
    totals = [line for line in out.read_text().splitlines() if line.startswith("totals:")]
    out.unlink()
    return int(totals[0].split()[1]) / weights


def neon_loop_instructions(bits: int) -> float:
    """Instructions per weight of the aarch64 build's full-group loop for `bits`-bit channels, counted statically
    from its disassembly (one loop iteration unpacks one 128-weight group). This is the measure closest to the
    paper's 0.48 SIMD instructions per weight on Neon: it leaves out the tail group and per-channel overhead, which
    callgrind counts on x86 but cannot run for aarch64."""
    binary = build_engine("aarch64", "unpack_dump") / "unpack_dump"
    dis = subprocess.run(["aarch64-linux-gnu-objdump", "-d", "--no-show-raw-insn", "-C", str(binary)],
                         capture_output=True, text=True, check=True).stdout
    head = f"<void edgeflow::simd::channel<edgeflow::simd::Neon, {bits}>("
    body = dis.split(head + "unsigned char const*, unsigned int, signed char*)>:\n", 1)[1].split("\n\n", 1)[0]
    longest = 0
    for line in body.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1].startswith("b.") and parts[2].isalnum():
            at, target = int(parts[0].rstrip(":"), 16), int(parts[2], 16)
            if target < at:  # a backward branch closes a loop
                longest = max(longest, (at - target) // 4 + 1)
    return longest / 128


def loadavg() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def measure_bits(bits: int, args, workdir: Path, artifact=None) -> tuple[list[dict], dict]:
    """All measures at one average bit-width: of `artifact` if given, else of a random one of the default shape."""
    rows, timelines = [], {}
    model = artifact.manifest["model"]["name"] if artifact is not None else "smollm2-135m-shape(random codes)"
    if artifact is None:
        artifact = random_artifact(DEFAULT_CONFIG, bits, seed=bits, name="smollm2-135m-shape")

    def row(layout, path, metric, value, unit, rep=0):
        rows.append(dict(experiment="bench-unpack", model=model, bits=bits,
                         packing=layout, path=path, metric=metric, value=value, unit=unit, repetition=rep,
                         loadavg=loadavg()))

    if shutil.which("aarch64-linux-gnu-objdump") and shutil.which("aarch64-linux-gnu-g++"):
        row("weightlet", "neon", "static_loop_instructions_per_weight", neon_loop_instructions(bits), "instr/weight")
    files = {}
    for layout in args.layouts:  # static measures: pack time, sizes, instruction counts
        files[layout] = file = workdir / f"{layout}-{bits}.efpk"
        t0 = time.monotonic()
        pack_artifact(artifact, file, layout=layout)
        row(layout, "python", "pack_seconds", time.monotonic() - t0, "s")
        stats = PackedFile(file).linear_stats()
        row(layout, "-", "file_bytes", stats["file_bytes"], "B")
        row(layout, "-", "linear_bytes", stats["payload_bytes"] + stats["scale_bytes"], "B")
        row(layout, "-", "bits_per_weight", stats["bits_per_weight"], "bit")
        if not args.no_callgrind:
            for path in unpack_paths(layout, args):
                ipw = instructions_per_weight(file, path, args.callgrind_layers, workdir)
                row(layout, path_label(layout, path), "instructions_per_weight", ipw, "instr/weight")

    # timed measures, the layouts interleaved within each repetition so a change in the host's load hits them alike
    runs: dict[str, list[dict]] = {layout: [] for layout in args.layouts}
    for i in range(args.reps):
        for layout, file in files.items():
            for path in unpack_paths(layout, args):
                if path == "scalar" and i >= max(1, args.reps // 2):
                    continue  # the scalar reference is slow and steady: fewer repetitions
                res = run_bench(file, "unpack", path=path, reps=1)
                row(layout, path_label(layout, path), "unpack_seconds", res["seconds"][0], "s", i)
                row(layout, path_label(layout, path), "unpack_throughput", res["weights"] / res["seconds"][0],
                    "int8 B/s/core", i)
            res = run_bench(file, "cold", load_threads=2)
            row(layout, "-", "cold_load_seconds", res["seconds"], "s", i)
            row(layout, "-", "resident_before_load", res["resident_before"], "fraction", i)
            res = run_bench(file, "e2e", load_threads=2, path="auto")
            row(layout, path_label(layout, "auto"), "e2e_seconds", res["seconds"], "s", i)
            row(layout, path_label(layout, "auto"), "resident_before_e2e", res["resident_before"], "fraction", i)
            runs[layout].append(res)
    for layout, file in files.items():
        timelines[layout] = sorted(runs[layout], key=lambda r: r["seconds"])[len(runs[layout]) // 2]  # the median run
        file.unlink()
    return rows, timelines


def unpack_paths(layout: str, args) -> list[str]:
    return [p for p in args.paths if p in supported_paths()] if layout == "weightlet" else [BASELINE_PATH]


def path_label(layout: str, path: str) -> str:
    """The weightlet rows name the SIMD path ("auto" resolved); the baselines have one kernel, labelled "native"."""
    if layout != "weightlet":
        return "native"
    return next(p for p in ("avx2", "neon", "sse") if p in supported_paths()) if path == "auto" else path


def _mean_bits(artifact) -> float:
    total = sum(q.codes.numel() for q in artifact.linears.values())
    return sum(float(q.bits.double().sum()) * q.codes.shape[1] for q in artifact.linears.values()) / total


def summarise(df: pd.DataFrame) -> dict:
    med = df.groupby(["bits", "packing", "path", "metric"])["value"].median()

    def get(bits, packing, metric, path=None):
        sel = med.xs((bits, packing), level=("bits", "packing"))
        sel = sel[sel.index.get_level_values("metric") == metric]
        if path is not None:
            sel = sel[sel.index.get_level_values("path") == path]
        return float(sel.iloc[0]) if len(sel) else float("nan")

    bits_list = sorted(df["bits"].unique())
    out = {"per_bits": {}}
    for b in bits_list:
        out["per_bits"][int(b)] = {
            "bytes_ratio_mixed48_over_weightlet": get(b, "mixed48", "linear_bytes") / get(b, "weightlet", "linear_bytes"),
            "load_speedup_vs_mixed48": get(b, "mixed48", "cold_load_seconds") / get(b, "weightlet", "cold_load_seconds"),
            "unpack_speedup_avx2_vs_kquant": get(b, "kquant", "unpack_seconds") / get(b, "weightlet", "unpack_seconds", "avx2"),
            "e2e_speedup_vs_kquant": get(b, "kquant", "e2e_seconds") / get(b, "weightlet", "e2e_seconds"),
            "e2e_speedup_vs_mixed48": get(b, "mixed48", "e2e_seconds") / get(b, "weightlet", "e2e_seconds"),
            "avx2_instructions_per_weight": get(b, "weightlet", "instructions_per_weight", "avx2"),
            "neon_static_loop_instructions_per_weight": get(b, "weightlet", "static_loop_instructions_per_weight", "neon"),
        }
    per = out["per_bits"]

    def mean(key, lo=1, hi=8):
        values = [per[b][key] for b in per if lo <= b <= hi]
        return statistics.mean(values) if values else float("nan")

    out["avx2_instructions_per_weight_mean_4to7"] = mean("avx2_instructions_per_weight", 4, 7)
    out["neon_static_loop_instructions_per_weight_mean_4to7"] = mean("neon_static_loop_instructions_per_weight", 4, 7)
    out["unpack_speedup_avx2_vs_kquant_mean"] = mean("unpack_speedup_avx2_vs_kquant")
    return out


def report(summary: dict) -> str:
    lines = ["bits | bytes mixed/weightlet | load x vs mixed | unpack x vs kquant (avx2) | e2e x vs kquant | "
             "e2e x vs mixed | avx2 instr/weight"]
    per = {int(b): s for b, s in summary["per_bits"].items()}  # (int keys turn into strings in JSON)
    for b, s in per.items():
        lines.append(f"{b:4d} | {s['bytes_ratio_mixed48_over_weightlet']:21.2f} | {s['load_speedup_vs_mixed48']:15.2f} | "
                     f"{s['unpack_speedup_avx2_vs_kquant']:25.2f} | {s['e2e_speedup_vs_kquant']:15.2f} | "
                     f"{s['e2e_speedup_vs_mixed48']:14.2f} | {s['avx2_instructions_per_weight']:.3f}")
    five = per.get(5, {}).get("bytes_ratio_mixed48_over_weightlet", float("nan"))
    ipw = summary["avx2_instructions_per_weight_mean_4to7"]
    spd = summary["unpack_speedup_avx2_vs_kquant_mean"]
    verdict = lambda ok, value: "not measured" if value != value else ("PASS" if ok else "FAIL")  # noqa: E731 (nan)
    lines += [
        "",
        f"target  bytes mixed48/weightlet at 5 bits >= 1.4   measured {five:.2f}  {verdict(five >= 1.4, five)}",
        f"target  AVX2 instructions/weight, mean 4..7 <= 0.5  measured {ipw:.3f}  (every instruction counted)  "
        f"{verdict(ipw <= 0.5, ipw)}",
        f"info    Neon full-group loop, static count, mean 4..7: {summary['neon_static_loop_instructions_per_weight_mean_4to7']:.3f} "
        f"instr/weight",
        f"target  AVX2 unpack >= 5x faster than kquant      measured {spd:.1f}x  {verdict(spd >= 5, spd)}",
        "(the paper's values are in results/paper/fig13.csv and fig4.csv; `make reproduce-fig13` compares them)",
    ]
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bits", type=int, nargs="+", default=[4, 5, 6, 7])
    ap.add_argument("--layouts", nargs="+", default=["weightlet", "mixed48", "kquant", "int8"], choices=sorted(LAYOUTS))
    ap.add_argument("--paths", nargs="+", default=["scalar", "sse", "avx2"], help="weightlet unpack paths to time")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--callgrind-layers", type=int, default=2)
    ap.add_argument("--no-callgrind", action="store_true")
    ap.add_argument("--results", type=Path, default=None, help="results store root (default results/runs)")
    ap.add_argument("--artifact", type=Path, nargs="+", default=[],
                    help="quantized-model artifact directories to measure instead of random codes (their mean bits "
                         "label the rows)")
    args = ap.parse_args(argv)
    if not args.no_callgrind and not shutil.which("valgrind"):
        sys.exit("valgrind is needed to count instructions (apt-get install valgrind), or pass --no-callgrind")
    workdir = cache_dir("bench-unpack")
    load_before = loadavg()
    if load_before > 1.5:
        print(f"warning: load average {load_before:.1f} on {os.cpu_count()} cores: timings will be noisy", file=sys.stderr)
    rows, timelines = [], {}
    jobs = [(b, None) for b in args.bits] if not args.artifact else [
        (round(float(a.manifest.get("effective_bits_per_weight") or _mean_bits(a))), a)
        for a in map(load_artifact, args.artifact)]
    for bits, artifact in jobs:
        r, t = measure_bits(bits, args, workdir, artifact)
        rows += r
        timelines[bits] = t
        print(f"bits {bits}: done (load average {loadavg():.1f})", file=sys.stderr, flush=True)
    df = pd.DataFrame(rows)
    summary = summarise(df)
    config = {k: v for k, v in vars(args).items() if k != "results"}
    recorder = BenchRecorder("unpack", config, ResultsStore(args.results))
    for r in rows:
        recorder.add(r["metric"], r["value"], r["unit"], repetition=r["repetition"], model=r["model"], bits=r["bits"],
                     packing=r["packing"], variant=r["path"], load=r["loadavg"])
    recorder.save()
    out = recorder.store.root / recorder.experiment  # beside the rows: what they do not hold
    doc = {"provenance": {"git_commit": git_commit(), "host": platform.node(), "cpu": platform.processor(),
                          "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                          "loadavg_before": load_before, "loadavg_after": loadavg(), "reps": args.reps,
                          "model": (", ".join(p.name for p in args.artifact) if args.artifact else
                                    "SmolLM2-135M shape, random codes, Figure 4a bit mix"),
                          "config": DEFAULT_CONFIG if not args.artifact else None},
           "config_hash": recorder.config_hash, "summary": summary, "timelines": timelines}
    tmp = out / f".unpack.json.{os.getpid()}"
    tmp.write_text(json.dumps(doc, indent=1))
    os.replace(tmp, out / TIMELINES)
    print(report(summary))
    print(f"\nsummary and timelines: {out / TIMELINES}")


if __name__ == "__main__":
    main()
