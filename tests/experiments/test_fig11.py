"""Figure 11 on synthetic rows (test fixtures, not measurements): each EdgeFlow row maps to its ablation step by
quantizer, bits, packing and pipeline; +pack and +pipeline share EF 5b's accuracy; the steps' changes sit beside the
paper's."""
import pandas as pd
import pytest

from experiments import fig10, fig11, run
from harness.runner.store import ResultsStore

TTFT = {"INT4": 0.6, "INT8": 1.0, "EF 5b": 0.95, "+pack": 0.7, "+pipeline": 0.65}
ACCURACY = {"INT4": 0.2, "INT8": 0.5, "EF 5b": 0.47}


def _rows():
    rows = []
    for dataset in ("lambada", "hellaswag"):
        for name, (_, quantizer, bits, packing, pipeline) in fig11.CONFIGS.items():
            base = {"model": "smollm2-135m", "system": "edgeflow", "quantizer": quantizer, "bits": bits,
                    "packing": packing, "pipeline": pipeline, "dataset": dataset, "status": "ok", "device": "local"}
            rows.append({**base, "experiment": "ttft", "metric": "ttft_s", "value": TTFT[name], "label": "measured",
                         "config_hash": f"t-{name}-{dataset}"})
            if name in ACCURACY:
                rows.append({**base, "experiment": "accuracy", "metric": "accuracy", "value": ACCURACY[name],
                             "label": "proxy", "notes": "n=50", "config_hash": f"a-{name}-{dataset}"})
    return rows


def test_steps_and_shared_accuracy(tmp_path):
    store = ResultsStore(tmp_path / "runs")
    rows = _rows()
    store.append("ttft", [r for r in rows if r["experiment"] == "ttft"])
    store.append("accuracy", [r for r in rows if r["experiment"] == "accuracy"])
    s = fig11.summary(pd.concat([store.read("ttft"), store.read("accuracy")])).set_index(["dataset", "config"])
    assert s.loc[("lambada", "+pipeline"), "accuracy"] == 0.47 and s.loc[("lambada", "+pack"), "ttft_s"] == 0.7
    section = run.render("fig11", store, tmp_path / "out")
    assert "| smollm2-135m | accuracy EF 5b / INT4 | +135.0% | +35.6% |" in section.body
    assert "| smollm2-135m | TTFT EF 5b / +pack, max over datasets | 1.36x | 1.36x (llama3-8b) |" in section.body
    assert section.figures[0].name == "fig11.png"
    # Figure 10 keeps its own EdgeFlow: weightlet packing under the default pipeline only
    ten = fig10._with_series(store.read("ttft"))
    assert set(ten.loc[ten["system"] == "edgeflow", "pipeline"]) == {"place+priority+steal"}


def test_the_sweep_has_five_timings_and_three_accuracies_per_dataset():
    pts = fig11.sweep(datasets=("lambada",))
    assert sum(p[0] == "experiment=ttft" for p in pts) == 5 and sum(p[0] == "experiment=accuracy" for p in pts) == 3


@pytest.mark.filterwarnings("error::UserWarning")  # matplotlib warns of a legend with nothing in it
def test_a_model_without_int8_rows_draws_a_note_not_an_empty_legend(tmp_path):
    rows = [r for r in _rows() if r["experiment"] == "ttft"]
    rows += [{**r, "model": "shape-qwen1.5-1.8b", "config_hash": "q" + r["config_hash"]} for r in rows
             if r["pipeline"] == "place+priority+steal"]  # only +pipeline, as a paper-shape run leaves it
    store = ResultsStore(tmp_path / "runs")
    store.append("ttft", rows)
    section = run.render("fig11", store, tmp_path / "out")
    assert section.figures[0].exists()
