"""`make bench-scale`: peak memory and time of every step that turns a checkpoint into what the engines load, on a
paper-sized model (default shape-qwen1.5-1.8b: Qwen1.5-1.8B's shape, random weights).

EdgeFlow's steps stream one layer at a time (harness/quant/stream.py, harness/pack/container.py) and must stay under

    bound = 2 x the largest decoder layer in FP32 + the calibration activations (tokens x hidden x 4 B)
            (+ with GPTQ rounding the larger of one layer's Gram matrices, one per input, in FP64 + FP32, as
               calibration sums them, and the widest linear's three [D, D] FP64 matrices, as GPTQ rounds it)

above the process's baseline (its RSS once Python, torch and transformers are imported, before the step starts).
llama.cpp's GGUF conversion and quantization and MNN's export are third-party steps, measured as they are, beside
the whole model's FP32 size. Each step runs in a process of its own (`python -m harness.bench.scale --step ...`) so
its peak RSS (VmHWM; for steps that run tools, the largest of its waited-for children too) is its own; outputs go to
a scratch folder, never the caches, so every run measures the work. Rows go to the store as experiment
`bench-scale`. `--npu SOC` (`make bench-scale NPU=sm8750`) quantizes with EdgeFlow's recipe for NPUs
(conf/npu_recipe/edgeflow.yaml: smoothing searched under HTP's numerics, the A16 sensitivity pass, GPTQ rounding,
whose calibration keeps every linear's Gram matrix) instead of the paper's.
"""
from __future__ import annotations

import argparse
import codecs
import collections
import json
import os
import resource
import signal
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

EDGEFLOW_STEPS = ("calibrate", "quantize", "pack")
THIRD_PARTY_STEPS = ("gguf-f16", "gguf-q8_0", "mnn-int8")
STEPS = EDGEFLOW_STEPS + THIRD_PARTY_STEPS
QUANTIZER = {"name": "edgeflow", "budget_bits": 5.0}  # conf/quantizer/edgeflow.yaml's defaults otherwise


def quantizer_params(npu: str | None = None) -> dict:
    """The quantizer the EdgeFlow steps run: QUANTIZER, with EdgeFlow's recipe for NPUs when `npu` names one."""
    if not npu:
        return dict(QUANTIZER)
    from harness.npu.config import load_npu_config
    from harness.npu.recipe import recipe_for

    load_npu_config(npu)  # an unknown SoC is an error naming the known ones
    return {**QUANTIZER, **recipe_for(QUANTIZER["name"], QUANTIZER["budget_bits"])}


def shape_bound(config: dict, calibration_tokens: int, gram: bool = False) -> dict:
    """The memory bound of EdgeFlow's streaming steps, from the model's shape (bytes); gram: for a quantizer that
    reads Gram matrices (Quantizer.needs_gram: GPTQ rounding)."""
    h, i = config["hidden_size"], config["intermediate_size"]
    d = config.get("head_dim") or h // config["num_attention_heads"]
    q, kv = config["num_attention_heads"] * d, config["num_key_value_heads"] * d
    layer_params = h * q + 2 * h * kv + q * h + 3 * h * i + 2 * h  # q, k, v, o, gate/up/down, two norms
    tables = config["vocab_size"] * h * (1 if config.get("tie_word_embeddings") else 2)
    params = layer_params * config["num_hidden_layers"] + tables + h
    layer_fp32, activations = 4 * layer_params, 4 * calibration_tokens * h
    # with Gram matrices: calibration sums one layer's in float64 (one per input: q, k, v share one, gate and up
    # one), each batch's product in float32 first, and hands them over in float32 (calibrate.py); GPTQ holds H,
    # inv(H) and its Cholesky factor [D, D] in float64 for the widest input (gptq.py)
    widest = max(h, q, i)
    grams = 12 * (2 * h * h + q * q + i * i) + 4 * widest ** 2  # q/k/v and gate/up read h, o the heads, down the MLP
    gram_bytes = max(grams, 3 * 8 * widest ** 2) if gram else 0
    return {"params": params, "model_fp32": 4 * params, "layer_fp32": layer_fp32, "activations": activations,
            "gram": gram_bytes, "bound": 2 * layer_fp32 + activations + gram_bytes}


# --- one step, in its own process ---------------------------------------------------------------------------------

def _rss(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"/proc/self/status has no {field}")


def run_step(step: str, checkpoint: Path, scratch: Path, model_name: str = "model",
             random_calibration: bool = False, npu: str | None = None) -> dict:
    """Do `step` on `checkpoint` into `scratch`; its time and memory. The calibration is the corpus's (as
    harness.quant.cache uses), or seeded random ids of the same count for a checkpoint without a tokenizer; the
    quantizer is quantizer_params(npu)."""
    # the libraries every step uses are imported before the baseline: their code is not the step's memory
    import torch
    import transformers.masking_utils  # noqa: F401
    import transformers.models.llama.modeling_llama  # noqa: F401
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer  # noqa: F401

    import harness.pack  # noqa: F401
    from harness.data.streams import calibration_tokens
    from harness.quant.cache import CALIBRATION
    from harness.quant.stream import StatsFile, write_artifact, write_stats

    stats, params = scratch / "stats.safetensors", quantizer_params(npu)
    if step != "calibrate":
        calibration = None  # (only calibration reads the corpus)
    elif random_calibration:
        vocab = AutoConfig.from_pretrained(checkpoint).vocab_size
        calibration = [torch.randint(0, vocab, (CALIBRATION["seq_len"],), generator=torch.Generator().manual_seed(i))
                       for i in range(CALIBRATION["n_samples"])]
    else:
        calibration = list(calibration_tokens(AutoTokenizer.from_pretrained(checkpoint), **CALIBRATION))
    baseline = _rss("VmRSS")
    start = time.perf_counter()
    if step == "calibrate":
        from harness.quant import make_quantizer

        quantizer = make_quantizer(params)
        write_stats(stats, checkpoint, calibration, quantizer.config.grid_tokens, gram=quantizer.needs_gram)
    elif step == "quantize":
        from harness.quant import make_quantizer

        quantizer = make_quantizer(params)
        quantizer.stats = StatsFile(stats)
        write_artifact(checkpoint, quantizer, model_name, scratch / "artifact")
    elif step == "pack":
        from harness.pack import pack_artifact

        pack_artifact(scratch / "artifact", scratch / "model.efpk", layout="weightlet")
    elif step.startswith("gguf-"):
        from harness.systems import llamacpp_build as build
        from harness.systems.llamacpp import LlamaCppConfig

        version = LlamaCppConfig().llamacpp_version
        build.build_tools(version)  # built (or found) before the clock: not part of the step
        start = time.perf_counter()
        if step == "gguf-f16":
            build.convert_to_gguf(checkpoint, scratch / "f16.gguf", version)
        else:
            build.quantize(scratch / "f16.gguf", scratch / "q8_0.gguf", "Q8_0", version)
    elif step == "mnn-int8":
        from harness.systems.mnn_export import export

        export(checkpoint, model_name, bits=8, out=scratch / "mnn")
    else:
        raise ValueError(f"unknown step {step!r}; steps: {', '.join(STEPS)}")
    seconds = time.perf_counter() - start
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    return {"step": step, "seconds": seconds, "baseline_bytes": baseline, "peak_bytes": _rss("VmHWM"),
            "children_peak_bytes": children}


# --- the bench ------------------------------------------------------------------------------------------------------

def measure(step: str, checkpoint: Path, scratch: Path, model_name: str = "model", random_calibration: bool = False,
            timeout_s: float = 7200, npu: str | None = None) -> dict:
    """Run one step in a fresh process; its time and memory, with the bound of the checkpoint's shape."""
    cmd = [sys.executable, "-m", "harness.bench.scale", "--step", step, "--checkpoint", str(checkpoint),
           "--scratch", str(scratch), "--model", model_name] + (["--random-calibration"] if random_calibration else [])
    cmd += ["--npu", npu] if npu else []
    res = _run_passing_progress(cmd, timeout_s)
    if res.returncode != 0:
        killed = f", killed after {timeout_s:.0f} s" if res.returncode == -signal.SIGKILL else ""
        raise RuntimeError(f"bench-scale step {step} failed (exit {res.returncode}{killed}):\n{res.stderr}")
    from harness.quant.cache import CALIBRATION

    r = json.loads(res.stdout.strip().splitlines()[-1])
    tokens = CALIBRATION["n_samples"] * CALIBRATION["seq_len"]  # the calibration set: windows of seq_len tokens
    from harness.quant import make_quantizer

    bound = shape_bound(json.loads((Path(checkpoint) / "config.json").read_text()), tokens,
                        gram=make_quantizer(quantizer_params(npu)).needs_gram)
    r["above_baseline_bytes"] = r["peak_bytes"] - r["baseline_bytes"]
    r["peak_rss_bytes"] = max(r["peak_bytes"], r["children_peak_bytes"])  # the step's process or its tools
    r.update({k: bound[k] for k in ("params", "model_fp32", "layer_fp32", "gram", "bound")})
    r["seconds_per_gparam"] = r["seconds"] / (bound["params"] / 1e9)
    r["within_bound"] = r["above_baseline_bytes"] <= bound["bound"] if step in EDGEFLOW_STEPS else None
    return r


def _run_passing_progress(cmd: list[str], timeout_s: float, tail_chars: int = 3000) -> subprocess.CompletedProcess:
    """Run cmd; its stderr (progress bars: a step at paper size takes up to an hour) passes through to ours as it
    comes, and its last tail_chars characters are kept for an error message; its stdout is returned; killed after
    timeout_s."""
    tail, out = collections.deque(maxlen=tail_chars), []
    decode = codecs.getincrementaldecoder("utf-8")(errors="replace").decode
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        reader = threading.Thread(target=lambda: out.append(proc.stdout.read()), daemon=True)  # (a full pipe blocks)
        reader.start()
        timer = threading.Timer(timeout_s, proc.kill)
        timer.start()
        try:
            for chunk in iter(lambda: os.read(proc.stderr.fileno(), 65536), b""):
                text = decode(chunk)
                sys.stderr.write(text)
                sys.stderr.flush()
                tail.extend(text)
            proc.wait()
        finally:
            timer.cancel()
        reader.join()
    return subprocess.CompletedProcess(cmd, proc.returncode, out[0].decode(), "".join(tail))


def run(model_name: str = "shape-qwen1.5-1.8b", steps=STEPS, store=None, scratch: Path | None = None,
        npu: str | None = None) -> list[dict]:
    from harness.bench.record import BenchRecorder
    from harness.cache import cache_dir
    from harness.models.zoo import checkpoint_dir, load_model_spec
    from harness.runner.store import ResultsStore

    checkpoint = checkpoint_dir(load_model_spec(model_name))
    scratch = scratch or cache_dir("bench-scale", model_name)
    params = quantizer_params(npu)
    rec = BenchRecorder("scale", {"model": model_name, "steps": list(steps), "quantizer": params},
                        store or ResultsStore())
    results = []
    try:
        for step in steps:
            print(f"[bench] {model_name}: {step} ...", flush=True)
            r = measure(step, checkpoint, scratch, model_name, npu=npu)
            results.append(r)
            _record(rec, r, model_name, npu)
            print(_line(r), flush=True)
    finally:
        rec.save()
        shutil.rmtree(scratch, ignore_errors=True)
    return results


def _record(rec, r: dict, model_name: str, npu: str | None = None) -> None:
    mb, step = 1e6, r["step"]
    if step in EDGEFLOW_STEPS:
        formula = (f"bound 2 x layer FP32 {r['layer_fp32'] / mb:.0f} MB + activations{_gram_term(r)} = "
                   f"{r['bound'] / mb:.0f} MB above a baseline of {r['baseline_bytes'] / mb:.0f} MB")
    else:
        formula = f"third-party step; the whole model in FP32 is {r['model_fp32'] / mb:.0f} MB"
    # soc: the SoC whose recipe EdgeFlow's steps quantized with (none: the paper's)
    columns = {"model": model_name, "variant": step, "soc": npu if step in EDGEFLOW_STEPS else None}
    rec.add("seconds", r["seconds"], "s", notes=formula, **columns)
    rec.add("seconds_per_billion_params", r["seconds_per_gparam"], "s/Gparam", **columns)
    rec.add("peak_rss_mb", r["peak_rss_bytes"] / mb, "MB", notes=formula, **columns)
    if step in EDGEFLOW_STEPS:
        rec.add("above_baseline_mb", r["above_baseline_bytes"] / mb, "MB", notes=formula, **columns)
        rec.add("bound_mb", r["bound"] / mb, "MB", notes=f"computed bound: {formula}", label="simulated", **columns)


def _gram_term(r: dict) -> str:
    """' + Gram matrices <MB> MB' where the bound has that term (shape_bound), else ''."""
    return f" + Gram matrices {r['gram'] / 1e6:.0f} MB" if r.get("gram") else ""


def _line(r: dict) -> str:
    mb = 1e6
    text = (f"[bench] {r['step']}: {r['seconds']:.1f} s ({r['seconds_per_gparam']:.1f} s per billion params), "
            f"peak RSS {r['peak_rss_bytes'] / mb:.0f} MB")
    if r["within_bound"] is not None:
        text += (f" = baseline {r['baseline_bytes'] / mb:.0f} + {r['above_baseline_bytes'] / mb:.0f} MB; bound "
                 f"{r['bound'] / mb:.0f} MB (2 x layer {r['layer_fp32'] / mb:.0f} + activations{_gram_term(r)}): "
                 f"{'within' if r['within_bound'] else 'OVER'}")
    else:
        text += f" (whole model in FP32: {r['model_fp32'] / mb:.0f} MB)"
    return text


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="shape-qwen1.5-1.8b")
    ap.add_argument("--steps", default=",".join(STEPS), help=f"comma-separated, from {', '.join(STEPS)}")
    ap.add_argument("--results", default=None, help="results store root (default results/runs)")
    ap.add_argument("--npu", default=None, help="a conf/npu SoC: quantize with EdgeFlow's recipe for NPUs")
    # (internal: one step in this process)
    ap.add_argument("--step", help=argparse.SUPPRESS)
    ap.add_argument("--checkpoint", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--scratch", type=Path, help="the folder the steps write to, removed at the end (default: the "
                    "cache's bench-scale/<model>; two runs at once need two)")
    ap.add_argument("--random-calibration", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.step:
        print(json.dumps(run_step(a.step, a.checkpoint, a.scratch, a.model, a.random_calibration, a.npu)))
        return
    steps = [s for s in a.steps.split(",") if s]
    unknown = sorted(set(steps) - set(STEPS))
    if unknown:
        ap.error(f"unknown steps {unknown}; steps: {', '.join(STEPS)}")
    from harness.runner.store import ResultsStore

    run(a.model, steps, ResultsStore(a.results), scratch=a.scratch, npu=a.npu)


if __name__ == "__main__":
    main()
