"""TEST FIXTURES ONLY: synthetic result rows shaped like the runner's, to exercise the renderers and the report.

The numbers below are made up by formula (deterministic, no randomness) and are never measurements: they only have
to look like a sweep's output (repetitions, an emulated device, proxy datasets, a system that cannot run here).
"""
from __future__ import annotations


DATASETS = {"lambada": 78, "winogrande": 137, "openbookqa": 210, "mmlu": 480, "hellaswag": 990}
# Made-up TTFT scale per system (seconds at the shortest prompt) and EdgeFlow's per-bit factor.
FAKE_TTFT = {"llamacpp": 4.0, "mnn": 2.4}
FAKE_EF_TTFT = {4: 0.95, 5: 1.0, 6: 1.05, 7: 1.1}
FAKE_ACC = {"llamacpp": 0.50, "mnn": 0.50, 4: 0.30, 5: 0.44, 6: 0.48, 7: 0.50}


# What identifies a configuration (the runner hashes the whole config; the fixture hashes these fields).
_CONFIG_FIELDS = ("model", "system", "quantizer", "bits", "packing", "dataset", "device", "flash_emulated_mbps")


def _row(**kw) -> dict:
    base = {"model": "smollm2-135m", "device": "local", "status": "ok", "repetition": 0, "git_commit": "fixture0",
            "host": "test-fixture", "time": "2026-01-01T00:00:00+00:00", "notes": "synthetic test fixture"}
    row = {**base, **kw}
    row.setdefault("config_hash", "fixture-" + "-".join(str(row.get(k)) for k in _CONFIG_FIELDS))
    return row


CORPUS = {"prompt_source": "corpus text (local, Shakespeare corpus)"}  # harness/data/prompts.py's CORPUS_PROMPT_LABEL
ITEMS = 100  # accuracy items per row (lm-eval limit), recorded in the notes as the runner does


def fig10_rows(model: str = "smollm2-135m", reps: int = 3, prompts: int = 3) -> dict[str, list[dict]]:
    """{experiment: rows} for a fig10-like sweep: llama.cpp, MNN, EdgeFlow 4..7 measured on `prompts` prompts x
    `reps` repetitions per dataset; llm.npu+ not run."""
    ttft, acc = [], []
    for dataset, tokens in DATASETS.items():
        scale = 1 + tokens / 400
        configs = [("llamacpp", None, FAKE_TTFT["llamacpp"]), ("mnn", None, FAKE_TTFT["mnn"])]
        configs += [("edgeflow", b, f) for b, f in FAKE_EF_TTFT.items()]
        for system, bits, base in configs:
            for prompt in range(prompts):
                for rep in range(reps):
                    ttft.append(_row(model=model, system=system, bits=bits, dataset=dataset,
                                     prompt_tokens=tokens + prompt, metric="ttft_s",
                                     value=base * scale * (1 + 0.01 * prompt) * (1 + 0.03 * rep), unit="s",
                                     repetition=rep, label="emulated", flash_emulated_mbps=200.0,
                                     prompt_index=prompt, **CORPUS, notes="synthetic test fixture"))
            acc.append(_row(model=model, system=system, bits=bits, dataset=dataset, metric="accuracy",
                            value=FAKE_ACC[bits or system], unit="fraction", label="proxy", items=ITEMS,
                            notes="synthetic test fixture; acc on a -local proxy task, shots=0"))
        ttft.append(_row(model=model, system="llmnpu", dataset=dataset, metric="not_run", status="not run",
                         label="not run", error="llm.npu runs only on an Android phone (device=local)"))
    return {"ttft": ttft, "accuracy": acc}


# Made-up perplexities (lower is better) in the paper's order EdgeFlow < CMPQ < SmoothQuant < SO at every bit-width.
FAKE_PPL = {"edgeflow": 20.0, "cmpq": 24.0, "smoothquant": 60.0, "shadow_outlier": 400.0}


def quantizer_rows(model: str = "smollm2-135m") -> dict[str, list[dict]]:
    """{experiment: rows}: perplexity and per-dataset accuracy for the four quantizers at 4..7 bits, plus FP16."""
    ppl, acc = [], []
    for q, base in FAKE_PPL.items():
        for bits in (4, 5, 6, 7):
            # EdgeFlow's fake-quant model computes the NPU's numerics (its artifact's output grids)
            numerics = "npu" if q == "edgeflow" else None
            ppl.append(_row(model=model, quantizer=q, bits=float(bits), dataset="wikitext2", metric="perplexity",
                            value=base * (1 + (7 - bits) * 0.5), unit="ppl", label="measured", numerics=numerics))
            for i, dataset in enumerate(DATASETS):
                # EdgeFlow best; its gain over CMPQ shrinks with bits like the paper's (13.55, 2.47, 0.67, 0.90).
                gap = {"edgeflow": 0.0, "cmpq": 0.12 / (bits - 3) ** 2, "smoothquant": 0.3, "shadow_outlier": 0.4}[q]
                acc.append(_row(model=model, quantizer=q, bits=float(bits), dataset=dataset, metric="accuracy",
                                value=0.6 - gap + 0.01 * i, unit="fraction", label="proxy", numerics=numerics))
    ppl.append(_row(model=model, quantizer="fp16", dataset="wikitext2", metric="perplexity", value=18.0, unit="ppl",
                    label="measured"))
    return {"perplexity": ppl, "accuracy": acc}


# Made-up packing benchmark output in the shape harness/bench/unpack.py writes (store rows, unpack.json timelines).
FAKE_LOAD = {"weightlet": 1.0, "mixed48": 1.42, "kquant": 1.0, "int8": 1.6}   # x bits/5
FAKE_UNPACK = {"weightlet": 0.1, "mixed48": 0.05, "kquant": 0.617, "int8": 0.0}


def bench_store_rows() -> list[dict]:
    rows = []
    for bits in (4, 5, 6, 7):
        for packing in FAKE_LOAD:
            load = FAKE_LOAD[packing] * bits / 5
            paths = ["scalar", "avx2"] if packing == "weightlet" else ["native"]
            for rep in range(3):
                for path in paths:
                    slow = 4.0 if path == "scalar" else 1.0
                    rows.append(dict(bits=bits, packing=packing, variant=path, metric="unpack_seconds",
                                     value=FAKE_UNPACK[packing] * slow * (1 + 0.01 * rep), unit="s", repetition=rep))
                rows.append(dict(bits=bits, packing=packing, variant="-", metric="cold_load_seconds", value=load,
                                 unit="s", repetition=rep))
                rows.append(dict(bits=bits, packing=packing, variant="auto", metric="e2e_seconds",
                                 value=max(load, FAKE_UNPACK[packing] * 5) + 0.05, unit="s", repetition=rep))
        rows.append(dict(bits=bits, packing="weightlet", variant="avx2", metric="instructions_per_weight", value=0.45,
                         unit="instr/weight", repetition=0))
        rows.append(dict(bits=bits, packing="weightlet", variant="scalar", metric="instructions_per_weight", value=9.0,
                         unit="instr/weight", repetition=0))
    for r in rows:
        r.update(experiment="bench-unpack", model="smollm2-135m-shape(random codes)", status="ok", label="measured",
                 config_hash="bench-unpack-fixture", notes="load average 1.00")
    return rows


def bench_timelines(layers: int = 4) -> dict:
    out = {}
    for bits in (4, 5, 6, 7):
        per = {}
        for packing in FAKE_LOAD:
            step = FAKE_LOAD[packing] * bits / 5 / layers * 2  # two threads: pairs of layers overlap
            un = FAKE_UNPACK[packing] * 5 / layers
            load_start = [(i // 2) * step for i in range(layers)]
            load_end = [s + step for s in load_start]
            unpack_start, t = [], 0.0
            for e in load_end:
                t = max(t, e)
                unpack_start.append(t)
                t += un
            unpack_end = [s + un for s in unpack_start]
            per[packing] = {"mode": "e2e", "path": "auto", "load_threads": 2, "seconds": max(unpack_end),
                            "load_start": load_start, "load_end": load_end, "unpack_start": unpack_start,
                            "unpack_end": unpack_end}
        out[str(bits)] = per
    return out


def bench_json(layers: int = 4) -> dict:
    """unpack.json as harness/bench/unpack.py writes it: provenance, a summary, the timelines."""
    keys = ("load_speedup_vs_mixed48", "unpack_speedup_avx2_vs_kquant", "e2e_speedup_vs_kquant",
            "e2e_speedup_vs_mixed48", "avx2_instructions_per_weight", "bytes_ratio_mixed48_over_weightlet")
    return {"provenance": {"model": "synthetic test fixture", "loadavg_before": 1.0, "loadavg_after": 1.0,
                           "git_commit": "fixture"},
            "summary": {"per_bits": {str(b): dict.fromkeys(keys, 1.0) for b in (4, 5, 6, 7)},
                                        "avx2_instructions_per_weight_mean_4to7": 0.45},
            "timelines": bench_timelines(layers)}
