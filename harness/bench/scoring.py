"""`make bench-scoring`: what multiple-choice scoring costs through our runtime, from scratch and prefix-shared.

    python -m harness.bench.scoring [--items 20] [--reps 3] [--bits 5] [--threads 2] [--reference]

The same lm-eval requests (hellaswag-local, `--items` documents, 4 endings each) through EdgeFlow's runtime over the
packed file its TTFT reads, four ways, interleaved per repetition:

  every-row      each request from scratch, logits of every position (how the harness scored before prefix sharing)
  last-rows      each request from scratch, the LM head on the continuation's rows only
  shared-serial  a document's context once, then each ending from its KV cache in a call of its own
  shared         a document's context once, then all its endings in one pass as sibling branches of it
                 (NativeEngine.logprobs_after, what harness/eval/scorer_lm.py uses)

All four must give the same accuracy and log-likelihoods (the runtime's rows are bit-identical; checked here on
every run); the time of each is printed with its ratio to every-row. `--reference` adds the fake-quant torch model
as the reference scorer (what experiment=accuracy system=edgeflow runs), from scratch and prefix-shared.
"""
from __future__ import annotations

import argparse
import statistics
import time

from harness.bench.record import BenchRecorder, cpu_info
from harness.engine.run import DEFAULT_THREADS
from harness.runner.settings import AccuracySettings


def _edgeflow(bits: int):
    """(packed file, artifact, FP16 model, tokenizer) of the default model quantized by EdgeFlow at `bits`."""
    from harness.artifact import load_artifact
    from harness.models.zoo import DEFAULT_MODEL, load_model, load_model_spec
    from harness.quant.cache import quantized_artifact
    from harness.runner.sweep import compose_config
    from harness.systems.edgeflow import packed_file

    spec = load_model_spec(DEFAULT_MODEL)
    model, tokenizer = load_model(spec)
    cfg = compose_config(["quantizer=edgeflow", f"quantizer.budget_bits={float(bits)}"])
    art_dir = quantized_artifact(spec, cfg.quantizer, tokenizer)
    return packed_file(spec.name, art_dir, "weightlet"), load_artifact(art_dir), model, tokenizer


def main(argv=None) -> None:
    import torch

    from harness.data.config import load_dataset_config
    from harness.engine.capi import NativeEngine
    from harness.eval.accuracy import evaluate_accuracy
    from harness.eval.scorer_lm import ScoredLM, torch_logprobs, torch_logprobs_after
    from harness.quant.fakequant import build_fakequant_model

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--items", type=int, default=20, help="hellaswag-local documents (4 requests each)")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--bits", type=int, default=5)
    p.add_argument("--threads", type=int, default=DEFAULT_THREADS)
    p.add_argument("--reference", action="store_true", help="also score every request with the fake-quant model")
    a = p.parse_args(argv)

    packed, artifact, model, tokenizer = _edgeflow(a.bits)
    dataset = load_dataset_config("hellaswag-local")
    reference = build_fakequant_model(artifact, model) if a.reference else None
    max_length = AccuracySettings.max_length  # the accuracy kind's scorer context
    with NativeEngine.open(packed, threads=a.threads, ctx=max_length) as engine:
        every_row = lambda ids, last: engine.logprobs(ids)[-last:]  # noqa: E731

        def serial_after(prefix, tails):  # the endings one call each after the context's (before sibling branches)
            first = torch.log_softmax(engine.logits(prefix, 1, reserve=max(map(len, tails))), dim=-1)
            return [torch.cat([first, torch.log_softmax(engine.logits(t, keep=len(prefix)), dim=-1)]) if t else first
                    for t in tails]

        ref = dict(reference=torch_logprobs(reference)) if reference is not None else {}
        modes = {
            "every-row": lambda: ScoredLM(every_row, tokenizer, max_length, **ref),
            "last-rows": lambda: ScoredLM(engine.logprobs, tokenizer, max_length, **ref),
            "shared-serial": lambda: ScoredLM(engine.logprobs, tokenizer, max_length, shared=serial_after, **ref),
            "shared": lambda: ScoredLM(engine.logprobs, tokenizer, max_length, shared=engine.logprobs_after,
                                       **ref, **({"reference_shared": torch_logprobs_after(reference)}
                                                 if reference is not None else {})),
        }
        engine.logprobs([1, 2, 3])  # weights resident before any timing
        seconds: dict[str, list[float]] = {m: [] for m in modes}
        results: dict[str, list] = {}
        for rep in range(a.reps):
            for mode, make in modes.items():
                lm = make()
                t0 = time.perf_counter()
                rows = evaluate_accuracy(None, tokenizer, dataset, limit=a.items, lm=lm)
                seconds[mode].append(time.perf_counter() - t0)
                results[mode] = sorted((r.metric, r.value) for r in rows)
                print(f"rep {rep} {mode:13s} {seconds[mode][-1]:6.2f} s  requests shared {lm.stats.shared}, alone "
                      f"{lm.stats.alone}", flush=True)
    if len({tuple(v) for v in results.values()}) != 1:
        raise SystemExit(f"the four ways disagree: {results}")

    rec = BenchRecorder("scoring", vars(a))
    base = statistics.median(seconds["every-row"])
    print(f"\n{cpu_info()['cpu']}, {a.threads} threads, hellaswag-local x {a.items} documents, EdgeFlow {a.bits} bits"
          f"{' + fake-quant reference' if a.reference else ''}; median (min-max) of {a.reps}")
    for mode, s in seconds.items():
        med = statistics.median(s)
        print(f"  {mode:13s} {med:6.2f} s ({min(s):.2f}-{max(s):.2f})  {base / med:4.2f}x faster than every-row")
        for i, v in enumerate(s):
            rec.add("scoring_s", v, "s", repetition=i, system="edgeflow", bits=float(a.bits), variant=mode,
                    notes=f"hellaswag-local, {a.items} documents, reference={a.reference}")
    print(f"  accuracy identical in all four: {dict(results['shared'])}")
    rec.save()


if __name__ == "__main__":
    main()
