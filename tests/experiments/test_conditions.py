"""No figure pools two measurement conditions: for each figure that draws one value per model and series, adding rows
measured under another condition (another device, an emulated flash, another power sensor, another scoring path),
with every value ten times larger, changes nothing in its section but one note naming what was left out."""
from __future__ import annotations

import pandas as pd
import pytest

from experiments import rules, run, selection
from harness.runner.store import ResultsStore
from tests.experiments import test_fig5, test_fig11, test_fig14, test_fig1516
from tests.experiments.synthetic_rows import quantizer_rows

NOTE = "left out of this figure"


def _elsewhere(rows: list[dict], **change) -> list[dict]:
    """The same rows measured under another condition: `change` applied, other configurations, values x10."""
    out = []
    for r in rows:
        value = r.get("value")
        out.append({**r, **change, "config_hash": f"elsewhere-{r.get('config_hash')}",
                    "value": value * 10 if isinstance(value, (int, float)) and pd.notna(value) else value})
    return out


def _by_experiment(rows: list[dict], default: str) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in rows:
        out.setdefault(r.get("experiment", default), []).append(r)
    return out


def _powered_elsewhere(rows: list[dict]) -> list[dict]:
    """The cold starts again with power from the loopback phone's scripted sensor files (label stand-in)."""
    out = []
    for r in _elsewhere(rows):
        if r["metric"] in selection.SENSOR_METRICS:
            r = {**r, "value": 2.0, "label": "stand-in"}
        out.append(r)
    return out


# figure -> (its rows under one condition, the rows it must not pool with them)
CASES = {
    "fig5": (lambda: test_fig5._rows(), lambda rows: _elsewhere(rows, device="phone-a")),
    "fig11": (lambda: test_fig11._rows(),
              lambda rows: _elsewhere([r for r in rows if r["metric"] == "ttft_s"], flash_emulated_mbps=200.0)),
    "fig12": (lambda: quantizer_rows()["accuracy"],  # Figure 10's EdgeFlow points, scored by our runtime
              lambda rows: _elsewhere([r for r in rows if r["quantizer"] == "edgeflow"], system="edgeflow")),
    "fig14": (lambda: test_fig14._rows(), lambda rows: _elsewhere(rows, device="phone-a")),
    "fig15": (lambda: test_fig1516._completion_rows(), lambda rows: _elsewhere(rows, device="phone-a")),
    "fig16": (lambda: test_fig1516._coldstart_rows(), _powered_elsewhere),
}
DEFAULT_EXPERIMENT = {"fig5": "pipeline", "fig12": "accuracy", "fig14": "pipeline"}


def _section(name: str, rows: list[dict], folder):
    store = ResultsStore(folder / "runs")
    for experiment, part in _by_experiment(rows, DEFAULT_EXPERIMENT.get(name, "")).items():
        store.append(experiment, part)
    return run.render(name, store, folder / "out")


def _without_note(body: str) -> list[str]:
    return [line for line in body.splitlines() if line.strip() and NOTE not in line]


@pytest.mark.parametrize("name", sorted(CASES))
def test_rows_of_another_condition_change_nothing_but_a_note(name, tmp_path):
    ours, elsewhere = CASES[name]
    alone = _section(name, ours(), tmp_path / "alone")
    mixed = _section(name, ours() + elsewhere(ours()), tmp_path / "mixed")
    assert alone.verdict != rules.NOT_RUN or name in ("fig15", "fig16")  # the figure drew something
    assert NOTE not in alone.body and NOTE in mixed.body
    assert _without_note(mixed.body) == _without_note(alone.body)
    assert (mixed.verdict, mixed.summary) == (alone.verdict, alone.summary)


def test_one_condition_keeps_the_largest_and_names_the_rest():
    rows = pd.DataFrame([{"model": "m", "device": "local", "metric": "ttft_s", "value": 1.0}] * 3
                        + [{"model": "m", "device": "phone-a", "metric": "ttft_s", "value": 9.0}]
                        + [{"model": "n", "device": "phone-a", "metric": "ttft_s", "value": 5.0}])
    kept, note = selection.one_condition(rows)
    assert list(kept["value"]) == [1.0, 1.0, 1.0, 5.0]
    assert "m · phone-a · device storage · builtin data (1 rows)" in note and "n ·" not in note


def test_scoring_path_names_what_computed_the_number():
    rows = pd.DataFrame({"system": ["edgeflow", None, None, "llamacpp"],
                         "label": ["measured", "proxy", "simulated", "measured"]})
    assert list(selection.scoring_path(rows)) == ["edgeflow", "fake-quant model", "HTP simulator", "llamacpp"]
