"""`make bench-runtime`: the native runtime against the machine's INT8 peak and against llama.cpp Q8_0, in one run.

    python -m harness.bench.runtime [--threads 2] [--prompt-tokens 128] [--reps 5] [--packed FILE ...]

Prints, side by side: warm prefill tokens/s and GOPS of edgeflow-run (INT8 weights) and of llama.cpp Q8_0
(llama-bench), the measured INT8 peak (edgeflow-bench-int8) and each engine's efficiency against it, and cold TTFT
of edgeflow-run at 4..8 bits (weightlet packing; at 5 bits also every linear A16, and without CRC checks) beside
llama.cpp Q8_0 cold. The accelerator lane computes the NPU's numerics (requantized outputs; A16 kernels). Speed does
not depend on the code values, so the packed files hold random codes of the default model's shapes
(harness.pack.synthetic); they are labelled as such. --packed adds real artifacts' files.
The cold comparison gives every engine the same work (harness/measure/workload.py): the same corpus prompt ids as the
`ttft` experiment's experiment.extra.prompt_tokens=N prompt, the request's context (or --ctx for all), --threads for
all, the same timed event (spawn -> first generated token on stdout) and cold state (files evicted, residency
checked), through each system's own run_cold (harness/systems), repetitions interleaved (harness/measure/compare.py).
Per engine it prints the exact command line, the ISA the engine reported, TTFT median (min..max) and the ratio to
llama.cpp with its spread; the load average is printed.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
from pathlib import Path

from harness.cache import cache_dir, progress_note
from harness.pack import pack_artifact
from harness.models.arch import linear_params
from harness.models.zoo import DEFAULT_MODEL, load_model_spec
from harness.pack.synthetic import random_artifact
from harness.engine.build import build as build_engine, engine_dir
from harness.bench.record import BenchRecorder
from harness.engine.run import run_edgeflow
from harness.runner.store import ResultsStore

DEFAULT_CONFIG = load_model_spec(DEFAULT_MODEL).architecture  # SmolLM2-135M's shape


def synthetic_packed(bits: int, act_bits: int = 8) -> Path:
    """A packed file of random codes at SmolLM2-135M's shapes with output grids (the accelerator lane computes the
    NPU's numerics, requantized outputs), activations at act_bits (16: every linear A16)."""
    out = cache_dir("runtime-bench") / f"smollm2-135m-random-{bits}bit-a{act_bits}-grids.efpk"
    if not out.is_file():
        with progress_note(f"packing a random-code SmolLM2-135M artifact at {bits} bits, A{act_bits}"):
            artifact = random_artifact(DEFAULT_CONFIG, bits, seed=bits, name="random", output_grids=True,
                                       act_bits=act_bits)
            pack_artifact(artifact, out, layout="weightlet")
    return out


def int8_peak(threads: int) -> dict:
    exe = engine_dir() / "edgeflow-bench-int8"
    res = subprocess.run([str(exe), str(threads), "0.5"], capture_output=True, text=True, check=True)
    return json.loads(res.stdout)


def prompt_ids(spec, n_tokens: int) -> list[int]:
    """The benchmark's prompt: a corpus prompt of exactly n_tokens ids under the default model's tokenizer (the
    same ids the `ttft` experiment uses with experiment.extra.prompt_tokens=n_tokens), which round-trip through
    text, so llama-completion (text in) can be given exactly these ids."""
    from transformers import AutoTokenizer

    from harness.data.prompts import fixed_length_prompts
    from harness.models.zoo import checkpoint_dir

    return list(fixed_length_prompts(AutoTokenizer.from_pretrained(checkpoint_dir(spec)), n_tokens, 1)[0].ids)


def llamacpp_prepared(spec, threads: int, device):
    """(llama.cpp system, its Prepared) or (None, the reason): the llama.cpp baseline (harness.systems.llamacpp:
    cached build of the tools and GGUF Q8_0 conversion, made on first use)."""
    try:
        from harness.systems import get_system

        system = get_system({"name": "llamacpp", "threads": threads})
        return system, system.prepare(spec, 8, device)
    except Exception as e:  # a failed build or conversion is reported, the rest of the benchmark goes on
        return None, f"{type(e).__name__}: {str(e)[:300]}"


def llamacpp_pp(tools: dict, threads: int, n_prompt: int, reps: int) -> list[float]:
    """Warm prompt processing of llama-bench (-p n_prompt, one pass: its batch defaults hold 128..512 tokens), on
    the kernel path llama-completion was probed to (tools["kernel_path"])."""
    from harness.systems.llamacpp_probe import BY_NAME

    res = subprocess.run([tools["llama-bench"], "-m", tools["gguf"], "-p", str(n_prompt), "-n", "0", "-t",
                          str(threads), "-r", str(reps), "-o", "json", *BY_NAME[tools["kernel_path"]].bench_args],
                         capture_output=True, text=True, timeout=600)
    if res.returncode != 0:
        raise RuntimeError(f"llama-bench failed: {res.stderr[-500:]}")
    row = json.loads(res.stdout)[0]
    return [float(x) for x in row.get("samples_ts") or [row["avg_ts"]]]


def _no_verify_edgeflow(cfg):
    """The EdgeFlow system with its CRC checks off (--no-verify): the same workload, one flag more."""
    from harness.systems import get_system

    system = get_system(cfg)
    system.verify_crc = False
    return system


def _edgeflow_entry(path: Path, label: str, weight_format: str, device, threads: int, verify_crc: bool = True):
    """A cold entry of the host build's edgeflow-run on one packed file."""
    from harness.measure.compare import Entry
    from harness.systems import get_system
    from harness.systems.base import Prepared, SystemConfig

    binary = str(engine_dir() / "edgeflow-run")
    prepared = Prepared("edgeflow", [str(path)], {"binary": binary, "model": str(path)}, weight_format)
    cfg = SystemConfig(name="edgeflow", threads=threads)
    system = get_system(cfg) if verify_crc else _no_verify_edgeflow(cfg)
    return Entry(f"{label} ({path.stat().st_size / 2**20:.1f} MiB)", system, prepared, device)


def edgeflow_entries(threads: int, device, bits: list[int]) -> list:
    """Cold entries of edgeflow-run on the random-code packed files, one per bit width, and at 5 bits without CRC
    checks and with every linear A16."""
    variants = [(b, False, 8) for b in bits] + ([(5, True, 8), (5, False, 16)] if 5 in bits else [])
    return [_edgeflow_entry(synthetic_packed(b, act_bits),
                            f"edgeflow {b} bits{' A16' if act_bits == 16 else ''}{' no CRC' if no_crc else ''}",
                            f"efpk weightlet {b} bits A{act_bits}, random codes, requantized outputs", device, threads,
                            verify_crc=not no_crc)
            for b, no_crc, act_bits in variants]


def packed_entries(threads: int, device, paths: list[str]) -> list:
    """Cold entries of edgeflow-run on packed files of real quantized artifacts (--packed), labelled by file and by
    the numerics their accelerator lane computes."""
    from harness.pack import PackedFile

    entries = []
    for path in map(Path, paths):
        f = PackedFile(path)
        a16 = sum(t.name.endswith(".act_bits") for t in f.tensors)
        numerics = "float outputs" if f.float_outputs else f"A16 on {a16} linears" if a16 else "A8"
        entries.append(_edgeflow_entry(path, f"edgeflow {path.stem} ({numerics})", f"efpk {path.name}, {numerics}",
                                       device, threads))
    return entries


def breakdown(entry) -> str:
    """The engine's own phases of a cold start (its System.ttft_phases; medians over the repetitions) as one line,
    or why there are none."""
    phases = [p for m in entry.measurements for rep in m.repetitions
              if (p := entry.system.ttft_phases({x.name: x.value for x in rep if x.value is not None}))]
    if not phases:
        return "phases: not reported by this engine"
    return "phases (s): " + ", ".join(f"{name} {statistics.median(p.get(name, 0.0) for p in phases):.3f}"
                                      for name in phases[0])


def main() -> None:
    from harness.devices import get_device
    from harness.measure.compare import Entry, print_comparison, run_interleaved, spread
    from harness.measure.workload import Workload

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--ctx", type=int, default=None, help="one context size for every engine (default: the "
                    "request's, harness.measure.workload.request_ctx)")
    ap.add_argument("--bits", default="4,5,6,7,8", help="EdgeFlow bit widths of the cold comparison")
    ap.add_argument("--results", default=None, help="results store root (default results/runs)")
    ap.add_argument("--packed", nargs="*", default=[], help="packed files of real artifacts timed beside the others "
                    "(e.g. the A8 and A16 recipes' files under ~/.cache/edgeflow-bench/packed/)")
    a = ap.parse_args()
    recorder = BenchRecorder("runtime", {k: v for k, v in vars(a).items() if k != "results"}, ResultsStore(a.results))
    build_engine("host")
    spec = load_model_spec(DEFAULT_MODEL)
    work = Workload.for_request(prompt_ids(spec, a.prompt_tokens), a.threads, ctx=a.ctx)
    ops_per_token = 2 * linear_params(DEFAULT_CONFIG)
    bits = [int(b) for b in a.bits.split(",")]
    packed = {b: synthetic_packed(b) for b in sorted(set(bits) | {8})}

    print(f"load average before: {open('/proc/loadavg').read().split()[:3]}  threads={a.threads}  "
          f"prompt={a.prompt_tokens} tokens (corpus prompt, ids sha256 {work.tokens_digest()})  ctx={work.ctx}  "
          f"model=SmolLM2-135M shapes; EdgeFlow files hold random codes (speed only)")
    peak = int8_peak(a.threads)
    fmt = lambda d: ", ".join(f"{k} {v:.1f}" for k, v in d.items())  # noqa: E731
    print(f"INT8 instructions alone (GOPS): {fmt(peak['instruction_gops'])}  -> INT8 peak {peak['int8_peak_gops']:.1f}")
    print(f"exact s8 x s8 -> s32 steps (GOPS): {fmt(peak['step_gops'])}  (sign + multiply [+ widen + add])")
    print(f"A16 multiply instructions alone (GOPS): {fmt(peak['a16_instruction_gops'])}")
    print(f"our GEMM alone ({peak['gemm_kernel']}, one layer's matmuls, T=128): {peak['gemm_gops']:.1f} GOPS")
    print(f"our A16 x INT8 GEMM alone ({peak['gemm16_kernel']}, the same matmuls): {peak['gemm16_gops']:.1f} GOPS = "
          f"{peak['a16_of_int8']:.2f}x the INT8 kernel's (HTP runs A16 at about half A8's rate)")
    print("every kernel, one layer's matmuls (T=128)    GOPS  of its instruction  (per core)")
    for family, kernels in (("INT8", peak["gemm_kernels"]), ("A16", peak["gemm16_kernels"])):
        for name, k in kernels.items():
            share = (f"{k['of_instruction']:6.1%} of {k['instruction']:<13} ({k['core_of_instruction']:.1%})"
                     if k.get("instruction") else "(its instruction is not measured)")
            print(f"  {family:4} {name:<12} {k['layer_gops']:27.1f}  {share}")
    ref_peak = peak["int8_peak_gops"]
    recorder.add("int8_peak_gops", ref_peak, "GOPS", variant="instruction peak")
    recorder.add("gemm_gops", peak["gemm_gops"], "GOPS", system="edgeflow", variant=peak["gemm_kernel"])
    recorder.add("gemm16_gops", peak["gemm16_gops"], "GOPS", system="edgeflow", variant=peak["gemm16_kernel"])

    warm = run_edgeflow(packed[8], list(work.token_ids), threads=a.threads, ctx=work.ctx, repeat_prefill=a.reps)
    ours_tps = warm.raw["warm_prefill_tokens_per_s"]
    ours_gops = ours_tps * ops_per_token / 1e9
    print("\nwarm prefill (weights in memory)        tokens/s      GOPS   of peak")
    print(f"  edgeflow-run INT8 (8-bit codes)    {ours_tps:10.1f} {ours_gops:9.1f}   {ours_gops / ref_peak:6.1%}"
          f"   ({warm.raw['gemm_kernel']})")
    recorder.add("warm_prefill_tokens_per_s", ours_tps, "tokens/s", system="edgeflow", bits=8,
                 variant=warm.raw["gemm_kernel"], prompt_tokens=a.prompt_tokens)
    device = get_device({"name": "local"})
    system, prepared = llamacpp_prepared(spec, a.threads, device)
    entries = []
    if system is not None:
        try:
            pp = llamacpp_pp(prepared.artifacts, a.threads, a.prompt_tokens, a.reps)
            ll_gops = statistics.median(pp) * ops_per_token / 1e9
            print(f"  llama.cpp Q8_0 (llama-bench pp)    {statistics.median(pp):10.1f} {ll_gops:9.1f}   "
                  f"{ll_gops / ref_peak:6.1%}   samples {spread(pp, '{:.1f}')}")
            print(f"  ratio edgeflow / llama.cpp: {ours_tps / statistics.median(pp):.2f}x")
            for i, tps in enumerate(pp):
                recorder.add("warm_prefill_tokens_per_s", tps, "tokens/s", repetition=i, system="llamacpp",
                             variant="Q8_0 llama-bench pp", prompt_tokens=a.prompt_tokens)
        except Exception as e:
            print(f"  llama.cpp warm: not run: {e}")
        entries.append(Entry("llama.cpp Q8_0", system, prepared, device))
    else:
        print(f"  llama.cpp: not run: {prepared}")
    entries += edgeflow_entries(a.threads, device, bits) + packed_entries(a.threads, device, a.packed)

    print("\ncold TTFT: every engine given the same work (harness/measure/workload.py), runs interleaved; "
          "median (min..max) s")
    try:
        run_interleaved(entries, work, a.reps)
    finally:
        device.close()
    reference = "llama.cpp Q8_0" if system is not None else None
    print_comparison(entries, reference=reference, extra={e.label: breakdown(e) for e in entries})
    recorder.add_comparison(entries, reference, prompt_tokens=a.prompt_tokens)
    recorder.save()
    print(f"\nload average after: {open('/proc/loadavg').read().split()[:3]}")


if __name__ == "__main__":
    main()
