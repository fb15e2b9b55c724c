"""Quantize a model with several (quantizer, budget) pairs and measure perplexity: the rows of Tables 4 and 5.

    rows = perplexity_sweep(model, "smollm2-135m", [("edgeflow", 4), ("cmpq", 4)], calibration, eval_tokens)

From the shell, on the default model and local text files (calibration and evaluation texts should differ):

    python -m harness.quant.sweep --calib-text A.txt --eval-text B.txt [B2.txt ...] \
        --quantizers smoothquant,shadow_outlier,cmpq,edgeflow --bits 4,5,6,7 --max-windows 4 --out rows.jsonl

Calibration statistics are collected once and reused by every pair (calibrate.py caches them). Each pair gives one
tidy row; a pair that fails gives a row with its error and the sweep goes on. The FP model's own row comes first.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path

import torch

from harness.artifact import save_artifact
from harness.eval.perplexity import perplexity
from harness.quant.base import make_quantizer
from harness.quant.fakequant import build_fakequant_model


def calibration_sequences(token_ids: torch.Tensor, num_sequences: int = 32, seq_len: int = 256,
                          seed: int = 0) -> list[torch.Tensor]:
    """num_sequences windows of seq_len tokens at seeded random offsets of a token stream."""
    token_ids = torch.as_tensor(token_ids)
    if token_ids.numel() < seq_len:
        raise ValueError(f"the calibration stream has {token_ids.numel()} tokens, fewer than seq_len={seq_len}")
    gen = torch.Generator().manual_seed(seed)
    starts = torch.randint(0, token_ids.numel() - seq_len + 1, (num_sequences,), generator=gen)
    return [token_ids[s:s + seq_len].long() for s in starts.tolist()]


def perplexity_sweep(model, model_name: str, pairs: list[tuple[str | Mapping, float]], calibration,
                     eval_tokens: torch.Tensor, window: int = 2048, max_windows: int | None = None,
                     artifact_root: str | Path | None = None, include_fp: bool = True,
                     on_row: Callable[[dict], None] | None = None) -> list[dict]:
    """One row per (quantizer name or config mapping, budget bits); artifacts saved under artifact_root if given;
    on_row(row) is called as each row is ready (to store rows as they come in a long sweep)."""
    rows = []
    emit = on_row or (lambda row: None)
    base = {"model": model_name, "metric": "perplexity", "unit": "ppl"}
    if include_fp:
        fp = perplexity(model, eval_tokens, window, max_windows)
        rows.append({**base, "quantizer": "fp", "bits": 16.0, "value": fp["ppl"], **_eval_cols(fp)})
        emit(rows[-1])
    for spec, budget in pairs:
        config = {"name": spec} if isinstance(spec, str) else dict(spec)
        config["budget_bits"] = budget
        row = {**base, "quantizer": config["name"], "bits": float(budget)}
        try:
            quantizer = make_quantizer(config)
            t0 = time.perf_counter()
            quantizer.calibrate(model, calibration)
            t1 = time.perf_counter()
            artifact = quantizer.quantize(model, model_name)
            t2 = time.perf_counter()
            if artifact_root is not None:
                save_artifact(artifact, Path(artifact_root) / f"{model_name}-{config['name']}-{budget:g}")
            result = perplexity(build_fakequant_model(artifact, model), eval_tokens, window, max_windows)
            row.update(value=result["ppl"], **_eval_cols(result),
                       effective_bits=artifact.manifest["effective_bits_per_weight"],
                       runtime_compatible=artifact.manifest["runtime_compatible"],
                       calibrate_seconds=t1 - t0, quantize_seconds=t2 - t1)
        except Exception as e:  # recorded, and the sweep goes on
            row.update(value=float("nan"), error=f"{type(e).__name__}: {e}")
        rows.append(row)
        emit(row)
    return rows


def main(argv=None) -> None:
    import argparse
    import json

    from harness.models.zoo import DEFAULT_MODEL, load_model, load_model_spec

    ap = argparse.ArgumentParser(description="perplexity of the default model quantized by several quantizers")
    ap.add_argument("--calib-text", required=True, help="text file for calibration (32 x 256 random windows)")
    ap.add_argument("--eval-text", required=True, nargs="+", help="text files, joined with blank lines")
    ap.add_argument("--quantizers", default="smoothquant,shadow_outlier,cmpq,edgeflow")
    ap.add_argument("--bits", default="4,5,6,7")
    ap.add_argument("--window", type=int, default=2048)
    ap.add_argument("--max-windows", type=int, default=None)
    ap.add_argument("--threads", type=int, default=None, help="torch threads (1 is fastest on a busy 2-core host)")
    ap.add_argument("--out", default=None, help="append one JSON row per line to this file")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    spec = load_model_spec(DEFAULT_MODEL)
    model, tokenizer = load_model(spec)
    encode = lambda text: torch.tensor(tokenizer(text)["input_ids"])
    calibration = calibration_sequences(encode(Path(args.calib_text).read_text()))
    tokens = encode("\n\n".join(Path(p).read_text() for p in args.eval_text))
    pairs = [(q, float(b)) for b in args.bits.split(",") for q in args.quantizers.split(",")]

    def emit(row):
        print(json.dumps(row), flush=True)
        if args.out:
            with open(args.out, "a") as f:
                f.write(json.dumps(row) + "\n")

    perplexity_sweep(model, spec.name, pairs, calibration, tokens, args.window, args.max_windows, on_row=emit)


def _eval_cols(result: dict) -> dict:
    return {k: result[k] for k in ("nll", "tokens", "windows", "protocol")}


if __name__ == "__main__":
    main()
