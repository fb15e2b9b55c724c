"""The accuracy kind: a row named after an engine is computed by that engine, or says why it is not run; the fake-quant
model's rows carry no engine's name."""
import pytest

from harness.quant.outputs import NPU_NUMERICS
from harness.runner.job import run_job
from harness.runner.store import ResultsStore
from harness.runner.sweep import compose_config


@pytest.mark.parametrize("experiment", ["accuracy", "fidelity"])
def test_an_engine_that_cannot_run_here_gives_a_not_run_row(tmp_path, experiment):
    store = ResultsStore(tmp_path / "runs")
    cfg = compose_config([f"experiment={experiment}", "system=llmnpu", "dataset=lambada-local"])
    assert run_job(cfg, store) == "not run"
    row = store.read(experiment).iloc[0]
    assert row["system"] == "llmnpu" and row["label"] == "not run" and "runs only on an Android phone" in row["error"]
    assert pd_isnull(row["value"])


@pytest.mark.real_model
def test_a_baselines_accuracy_and_fidelity_are_its_own_forward_pass(tmp_path, tiny_checkpoint):
    """llama.cpp scores lm-eval's requests and the held-out windows over the Q8_0 GGUF its TTFT loads."""
    store = ResultsStore(tmp_path / "runs")
    model = ["model.name=tiny-fig10-test", f"model.path={tiny_checkpoint}", "model.source=hf", "system=llamacpp"]
    assert run_job(compose_config(["experiment=accuracy", *model, "dataset=lambada-local",
                                   "experiment.eval_limit=4"]), store) == "ok"
    acc = store.read("accuracy").set_index("metric").loc["accuracy"]
    assert acc["system"] == "llamacpp" and acc["bits"] == 8 and acc["label"] == "proxy"
    assert "scored by llamacpp's own forward pass over gguf Q8_0 (Q8_0.gguf)" in acc["notes"]
    assert run_job(compose_config(["experiment=fidelity", *model, "experiment.extra.fidelity_windows=2",
                                   "experiment.extra.fidelity_window=64"]), store) == "ok"
    fid = store.read("fidelity")
    assert sorted(set(fid["metric"])) == ["kl_fp16_runtime", "top1_agreement_runtime"] and len(fid) == 4
    assert (fid["system"] == "llamacpp").all() and (fid.loc[fid.metric == "kl_fp16_runtime", "value"] >= 0).all()


def test_edgeflow_accuracy_needs_its_quantizer(tmp_path):
    cfg = compose_config(["experiment=accuracy", "system=edgeflow", "dataset=lambada-local"])
    assert run_job(cfg, ResultsStore(tmp_path / "runs")) == "failed"
    row = ResultsStore(tmp_path / "runs").read("accuracy").iloc[0]
    assert "add quantizer=edgeflow" in row["error"]


def test_fig10_sweeps_engines_and_labelled_stand_ins():
    from experiments import fig10

    pts = fig10.sweep(datasets=("lambada",), bits=(5,), kinds=("accuracy",))
    engines = [p for p in pts if any(o.startswith("system=") for o in p)]
    stand_ins = [p for p in pts if not any(o.startswith("system=") for o in p)]
    assert all("quantizer=edgeflow" in p for p in engines if "system=edgeflow" in p)
    assert all(not any(o.startswith("quantizer=") for o in p) for p in engines if "system=edgeflow" not in p)
    assert sorted(next(o for o in p if o.startswith("quantizer=")) for p in stand_ins) == \
        ["quantizer=int8", "quantizer=shadow_outlier"]
    assert fig10.series_name(None, 8.0, "uniform") == "stand-in (fake-quant INT8)"  # the int8 option's quantizer


def pd_isnull(v) -> bool:
    import pandas as pd

    return bool(pd.isna(v))


@pytest.mark.real_model
def test_edgeflow_accuracy_comes_from_its_runtime_with_agreement_rows(tmp_path):
    store = ResultsStore(tmp_path / "runs")
    cfg = compose_config(["experiment=accuracy", "system=edgeflow", "quantizer=edgeflow", "quantizer.budget_bits=5.0",
                          "packing=weightlet", "dataset=lambada-local", "experiment.eval_limit=8",
                          "experiment.extra.agreement_items=8"])
    assert run_job(cfg, store) == "ok"
    rows = store.read("accuracy").set_index("metric")
    # through the System contract as every engine: its own forward pass over the packed file its TTFT loads
    assert "scored by edgeflow's own forward pass over efpk weightlet 5 bits" in rows.loc["accuracy", "notes"]
    assert rows.loc["accuracy", "label"] == "proxy" and rows.loc["accuracy", "numerics"] == NPU_NUMERICS
    accuracy = rows.loc["accuracy", "value"]  # a share of the 8 items (experiment.eval_limit), counted as such
    assert abs(accuracy * 8 - round(accuracy * 8)) < 1e-9 and rows.loc["accuracy", "items"] == 8
    # The runtime and its fake-quant reference mostly agree: per token ~0.78 on held-out text under the NPU's
    # numerics (a float-order difference that moves an input across a rounding boundary moves an output by a whole
    # step of its 8-bit grid; 0.88 with float outputs), measured 2026-12-07 on the default model at 5 bits
    assert rows.loc["agreement_top1", "value"] > 0.5
    assert "requests of the first 8 items (" in rows.loc["agreement_top1", "notes"]
    assert rows.loc["agreement_top1", "notes"].endswith(", 8 requests)")
    assert rows.loc["agreement_max_abs_loglik", "value"] >= rows.loc["agreement_mean_abs_loglik", "value"] >= 0
    items = rows.loc["item_accuracy"]  # each document's result, for pairing (experiments/fig12.py)
    assert sorted(items["prompt_index"]) == list(range(8)) and items["value"].mean() == pytest.approx(accuracy)


def test_fig10_shows_the_runtimes_agreement_with_its_reference():
    import pandas as pd

    from experiments import fig10

    rows = pd.DataFrame([{"model": "m", "dataset": "lambada", "series": "EF 5b", "status": "ok", "metric": metric,
                          "value": value} for metric, value in (("agreement_top1", 0.9), ("accuracy", 0.2),
                                                                 ("agreement_max_abs_loglik", 0.54))])
    table = fig10.agreement_table(rows)
    assert table.iloc[0]["top-1 agreement (scored tokens)"] == "0.9"
    assert table.iloc[0]["max abs. difference of log-likelihoods (nats)"] == "0.54"


@pytest.mark.real_model
def test_a_quantizers_accuracy_through_our_runtime_where_it_can_run_the_method(tmp_path, tiny_checkpoint):
    """experiment.extra.evaluator=runtime: a runtime-compatible method is scored by the INT8 runtime over its artifact
    (variant says so, agreement rows bound the difference from the fake-quant model); shadow outliers, which the
    runtime cannot run, by the fake-quant model, labelled stand-in and saying why."""
    from harness.runner.store import RUNTIME_EVALUATED

    store = ResultsStore(tmp_path / "runs")
    model = ["model.name=tiny-fig10-test", f"model.path={tiny_checkpoint}", "model.source=hf"]
    for q in ("edgeflow", "shadow_outlier"):
        cfg = compose_config(["experiment=accuracy", *model, f"quantizer={q}", "quantizer.budget_bits=5.0",
                              "dataset=lambada-local", "experiment.eval_limit=4", "experiment.extra.agreement_items=2",
                              "experiment.extra.evaluator=runtime"])
        assert run_job(cfg, store) == "ok"
    rows = store.read("accuracy")
    ef = rows[rows["quantizer"] == "edgeflow"].set_index("metric")
    assert ef.loc["accuracy", "variant"] == RUNTIME_EVALUATED and ef.loc["accuracy", "label"] == "proxy"
    assert "scored by our runtime's INT8 forward pass over the artifact" in ef.loc["accuracy", "notes"]
    assert ef.loc["agreement_top1", "variant"] == RUNTIME_EVALUATED
    assert "first 2 items" in ef.loc["agreement_top1", "notes"]
    assert len(ef.loc["item_accuracy"]) == 4 and (ef.loc["item_accuracy", "variant"] == RUNTIME_EVALUATED).all()
    so = rows[rows["quantizer"] == "shadow_outlier"].set_index("metric")
    assert so.loc["accuracy", "label"] == "stand-in" and pd_isnull(so.loc["accuracy", "variant"])
    assert "our runtime cannot run this method: shadow outliers" in so.loc["accuracy", "notes"]
    assert "agreement_top1" not in so.index


def test_an_unknown_evaluator_is_a_config_error():
    from harness.config import ConfigError
    from harness.runner.job import prepare_job

    cfg = compose_config(["experiment=accuracy", "quantizer=edgeflow", "dataset=lambada-local",
                          "experiment.extra.evaluator=npu"])
    with pytest.raises(ConfigError, match=r"experiment.extra.evaluator must be one of fake-quant, runtime, got 'npu'"):
        prepare_job(cfg)
