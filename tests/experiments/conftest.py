"""TEST FIXTURES ONLY: synthetic result rows shaped like the runner's, to exercise the renderers and the report.

The numbers below are made up by formula (deterministic, no randomness) and are never measurements: they only have
to look like a sweep's output (repetitions, an emulated device, proxy datasets, a system that cannot run here).
"""
from __future__ import annotations

import pytest

from harness.runner.store import ResultsStore

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


@pytest.fixture
def fig10_store(tmp_path) -> ResultsStore:
    store = ResultsStore(tmp_path / "runs")
    for experiment, rows in fig10_rows().items():
        store.append(experiment, rows)
    return store
