"""How long quantization takes, and how it scales with model width (`make bench-quant`).

Times calibration (32 x 256 tokens by default) and quantization at one budget for the default model and for random
Llama models of the default's layer shape and of twice its width, with the same number of layers, so the ratio
shows how the cost grows with the weights per layer. Prints one JSON line per model with the load average: on a
shared machine the absolute seconds move with the load, the ratio much less.

    python -m harness.bench.quant [--quantizer edgeflow] [--budget 5] [--threads 1]
"""
from __future__ import annotations

import argparse
import json
import os
import time

import torch

from harness.bench.record import BenchRecorder
from harness.quant.base import make_quantizer
from harness.runner.store import ResultsStore
from harness.quant.calibrate import target_linears


def time_quantization(model, calibration, config: dict) -> dict:
    quantizer = make_quantizer(config)
    t0 = time.perf_counter()
    quantizer.calibrate(model, calibration)
    t1 = time.perf_counter()
    artifact = quantizer.quantize(model)
    t2 = time.perf_counter()
    weights = sum(m.weight.numel() for m in target_linears(model).values())
    return {"calibrate_s": round(t1 - t0, 2), "quantize_s": round(t2 - t1, 2), "linear_weights": weights,
            "effective_bits": round(artifact.manifest["effective_bits_per_weight"], 4)}


def random_llama(hidden: int, intermediate: int, layers: int, heads: int, kv_heads: int, vocab: int):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(hidden_size=hidden, intermediate_size=intermediate, num_hidden_layers=layers,
                         num_attention_heads=heads, num_key_value_heads=kv_heads, vocab_size=vocab,
                         head_dim=hidden // heads, tie_word_embeddings=True)
    return LlamaForCausalLM(config).float().eval()


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quantizer", default="edgeflow")
    ap.add_argument("--budget", type=float, default=5.0)
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    ap.add_argument("--sequences", type=int, default=32)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--random-layers", type=int, default=6)
    ap.add_argument("--results", default=None, help="results store root (default results/runs)")
    args = ap.parse_args(argv)
    recorder = BenchRecorder("quant", {k: v for k, v in vars(args).items() if k != "results"}, ResultsStore(args.results))
    torch.set_num_threads(args.threads)
    config = {"name": args.quantizer, "budget_bits": args.budget}
    gen = torch.Generator().manual_seed(0)

    def report(label, model):
        vocab = model.config.vocab_size
        calib = [torch.randint(0, vocab, (args.seq_len,), generator=gen) for _ in range(args.sequences)]
        row = {"model": label, "quantizer": args.quantizer, "budget": args.budget, "threads": args.threads,
               **time_quantization(model, calib, config), "loadavg": os.getloadavg()[0]}
        print(json.dumps(row), flush=True)
        for metric, unit in (("calibrate_s", "s"), ("quantize_s", "s"), ("linear_weights", "count"),
                             ("effective_bits", "bit")):
            recorder.add(metric, row[metric], unit, model=label, quantizer=args.quantizer, bits=args.budget,
                         variant=f"{args.threads} threads", load=row["loadavg"])
        return row

    from harness.models.zoo import DEFAULT_MODEL, load_model, load_model_spec

    model, _ = load_model(load_model_spec(DEFAULT_MODEL))
    report(DEFAULT_MODEL, model)
    c = model.config
    shape = dict(layers=args.random_layers, heads=c.num_attention_heads, kv_heads=c.num_key_value_heads, vocab=4096)
    base = report(f"random-{c.hidden_size}x{c.intermediate_size}",
                  random_llama(c.hidden_size, c.intermediate_size, **shape))
    wide = report(f"random-{2 * c.hidden_size}x{2 * c.intermediate_size}",
                  random_llama(2 * c.hidden_size, 2 * c.intermediate_size, **shape))
    print(json.dumps({"width_x2": {"weights_ratio": wide["linear_weights"] / base["linear_weights"],
                                   "quantize_time_ratio": round(wide["quantize_s"] / base["quantize_s"], 2),
                                   "calibrate_time_ratio": round(wide["calibrate_s"] / base["calibrate_s"], 2)}}))
    recorder.add("quantize_time_ratio_width_x2", wide["quantize_s"] / base["quantize_s"], "x", quantizer=args.quantizer,
                 bits=args.budget, variant=f"{args.threads} threads", notes="2x hidden and intermediate width (4x weights)")
    recorder.save()


if __name__ == "__main__":
    main()
