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


def _row(**kw) -> dict:
    base = {"model": "smollm2-135m", "device": "local", "status": "ok", "repetition": 0, "config_hash": "fixture",
            "host": "test-fixture", "time": "2026-01-01T00:00:00+00:00", "notes": "synthetic test fixture"}
    return {**base, **kw}


def fig10_rows(model: str = "smollm2-135m", reps: int = 3) -> dict[str, list[dict]]:
    """{experiment: rows} for a fig10-like sweep: llama.cpp, MNN, EdgeFlow 4..7 measured; llm.npu+ not run."""
    ttft, acc = [], []
    for dataset, tokens in DATASETS.items():
        scale = 1 + tokens / 400
        configs = [("llamacpp", None, FAKE_TTFT["llamacpp"]), ("mnn", None, FAKE_TTFT["mnn"])]
        configs += [("edgeflow", b, f) for b, f in FAKE_EF_TTFT.items()]
        for system, bits, base in configs:
            for rep in range(reps):
                ttft.append(_row(model=model, system=system, bits=bits, dataset=dataset, prompt_tokens=tokens + rep,
                                 metric="ttft_s", value=base * scale * (1 + 0.03 * rep), unit="s", repetition=rep,
                                 label="emulated", flash_emulated_mbps=200.0))
            acc.append(_row(model=model, system=system, bits=bits, dataset=dataset, metric="accuracy",
                            value=FAKE_ACC[bits or system], unit="fraction", label="proxy",
                            notes="synthetic test fixture; acc on a -local proxy task"))
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
            ppl.append(_row(model=model, quantizer=q, bits=float(bits), dataset="wikitext2", metric="perplexity",
                            value=base * (1 + (7 - bits) * 0.5), unit="ppl", label="measured"))
            for i, dataset in enumerate(DATASETS):
                # EdgeFlow best; its gain over CMPQ shrinks with bits like the paper's (13.55, 2.47, 0.67, 0.90).
                gap = {"edgeflow": 0.0, "cmpq": 0.12 / (bits - 3) ** 2, "smoothquant": 0.3, "shadow_outlier": 0.4}[q]
                acc.append(_row(model=model, quantizer=q, bits=float(bits), dataset=dataset, metric="accuracy",
                                value=0.6 - gap + 0.01 * i, unit="fraction", label="proxy"))
    ppl.append(_row(model=model, quantizer="fp16", dataset="wikitext2", metric="perplexity", value=18.0, unit="ppl",
                    label="measured"))
    return {"perplexity": ppl, "accuracy": acc}
