"""The experiments that put QNN HTP in the loop, end to end on a tiny checkpoint: experiment=npu_oracle (compile per
layer, HTP vs our numerics) and experiment=fidelity with an npu group (quality as HTP computes the matmuls)."""
import pandas as pd
import pytest

from harness.npu.htp import unavailable_reason
from harness.runner.job import run_job
from harness.runner.store import ResultsStore
from harness.runner.sweep import compose_config

pytestmark = [pytest.mark.real_model,
              pytest.mark.skipif(bool(unavailable_reason()), reason=unavailable_reason() or "")]


def tiny(tiny_checkpoint, bits: int = 6) -> list[str]:
    return ["model.name=tiny-npu-test", f"model.path={tiny_checkpoint}", "model.source=hf", "quantizer=edgeflow",
            f"quantizer.budget_bits={bits}"]


def scoped(rows: pd.DataFrame) -> pd.Series:
    """npu_compile's values by (metric, split, 'layer i' | 'all layers' | 'one graph')."""
    scope = [f"layer {int(layer)}" if pd.notna(layer) else variant for layer, variant in zip(rows.layer, rows.variant)]
    return rows.assign(scope=scope).set_index(["metric", "npu_split", "scope"])["value"]


def test_npu_oracle_rows_per_layer_for_the_chosen_soc(tmp_path, tiny_checkpoint):
    store = ResultsStore(tmp_path / "runs")
    # npu=sm8650 selects EdgeFlow's recipe for HTP (conf/npu_recipe/), A16 on half the MACs: all A8 here
    cfg = compose_config(["experiment=npu_oracle", "npu=sm8650", *tiny(tiny_checkpoint), "+quantizer.a16_budget=0.0"])
    assert run_job(cfg, store) == "ok"
    rows = store.read("npu_oracle")
    values = rows.set_index(["metric", "soc", "layer"])["value"]  # columns, not a variant string to parse
    for layer in (0, 1):
        v = ("sm8650", layer)
        assert values[("htp_lsb_max", *v)] <= 1 and values[("htp_lsb_max_runtime", *v)] <= 1
        assert 0 <= values[("htp_lsb_share", *v)] < 0.1
    assert (rows["label"] == "simulated").all() and "soc_model 57" in rows["notes"].iloc[0]
    assert not rows.metric.str.contains("_a16").any()


def test_npu_oracle_reports_a16_linears_in_their_own_unit(tmp_path, tiny_checkpoint):
    store = ResultsStore(tmp_path / "runs")
    cfg = compose_config(["experiment=npu_oracle", *tiny(tiny_checkpoint), "+quantizer.a16_budget=0.5"])
    assert run_job(cfg, store) == "ok"
    rows = store.read("npu_oracle")
    a16 = rows[rows.metric == "htp_lsb_max_a16"]
    assert len(a16) >= 1 and (a16.unit == "LSB16").all() and "A16W8 on" in a16.notes.iloc[0]
    assert (rows[rows.metric == "htp_lsb_max"].unit == "LSB8").all()
    lane = rows[rows.metric == "htp_lsb_max_a16_runtime"]  # the runtime's lane computes A16 as the reference does
    assert list(lane.value) == list(a16.value) and (lane.unit == "LSB16").all()


def test_npu_compile_times_each_layer_and_the_whole_model(tmp_path, tiny_checkpoint):
    store = ResultsStore(tmp_path / "runs")
    assert run_job(compose_config(["experiment=npu_compile", *tiny(tiny_checkpoint)]), store) == "ok"
    rows = store.read("npu_compile")
    assert set(rows.soc) == {"sm8750"} and set(rows.npu_split) == {"edgeflow"}
    values = scoped(rows)
    for v in ("layer 0", "layer 1", "one graph"):
        assert values[("qnn_context_mb", "edgeflow", v)] > values[("qnn_weights_mb", "edgeflow", v)] > 0
        assert values[("qnn_compile_s", "edgeflow", v)] > 0 and values[("qnn_load_s", "edgeflow", v)] > 0
    layers = [values[("qnn_weights_mb", "edgeflow", f"layer {i}")] for i in (0, 1)]
    assert values[("qnn_weights_mb", "edgeflow", "all layers")] == pytest.approx(sum(layers))
    assert values[("qnn_weights_mb", "edgeflow", "one graph")] == pytest.approx(sum(layers))
    assert (rows["label"] == "measured").all() and "timing only" in rows["notes"].iloc[0]


def test_npu_compile_of_llmnpus_coarse_split_puts_more_of_each_layer_on_the_npu(tmp_path, tiny_checkpoint):
    """llm.npu's split compiles two graphs per layer from the same linears (so the same weight bytes) with its norms,
    SiLU and residual adds on HTP too; no graph falls back to the CPU (htp.py disables the fallback)."""
    store = ResultsStore(tmp_path / "runs")
    for split in ("edgeflow", "llmnpu"):
        cfg = compose_config(["experiment=npu_compile", *tiny(tiny_checkpoint), f"experiment.extra.split={split}"])
        assert run_job(cfg, store) == "ok"
    rows = store.read("npu_compile")
    values = scoped(rows)
    for layer in (0, 1):
        ours, theirs = ("edgeflow", f"layer {layer}"), ("llmnpu", f"layer {layer}")
        assert values[("qnn_weights_mb", *theirs)] == pytest.approx(values[("qnn_weights_mb", *ours)])
        assert values[("qnn_context_mb", *theirs)] > values[("qnn_weights_mb", *theirs)]
        assert values[("qnn_compile_s", *theirs)] > 0 and values[("qnn_load_s", *theirs)] > 0
    assert ("qnn_compile_s", "llmnpu", "all layers") in values.index
    assert ("qnn_compile_s", "llmnpu", "one graph") not in values.index
    assert rows.loc[rows.npu_split == "llmnpu", "notes"].str.contains("coarse split").all()


def test_fidelity_through_htp_is_simulated_and_close_to_the_reference(tmp_path, tiny_checkpoint):
    store = ResultsStore(tmp_path / "runs")
    cfg = compose_config(["experiment=fidelity", "npu=sm8750", *tiny(tiny_checkpoint, 8),
                          "experiment.extra.fidelity_windows=2", "experiment.extra.fidelity_window=64"])
    assert run_job(cfg, store) == "ok"
    fid = store.read("fidelity")
    htp = fid[fid.metric == "kl_fp16_htp"]
    assert len(htp) == 2 and (htp.label == "simulated").all() and "HTP simulator" in htp.notes.iloc[0]
    assert set(htp.soc) == {"sm8750"} and fid[fid.metric == "kl_fp16"].soc.isna().all()  # who compiled what: a column
    static = fid[fid.metric == "kl_fp16"]["value"].mean()
    # HTP adds the output requantization to what the fake-quant model computes: some more error (3.2x here, where
    # the default 4x headroom spends 2 of the 8 output bits), not a different model (a wrong scale or sign would be
    # orders of magnitude)
    assert 0 < htp["value"].mean() < 5 * static
    assert fid[fid.metric == "top1_agreement_htp"]["value"].min() >= 0.9


def test_accuracy_through_htp_is_scored_by_the_simulator(tmp_path, tiny_checkpoint):
    store = ResultsStore(tmp_path / "runs")
    base = ["experiment=accuracy", *tiny(tiny_checkpoint, 8), "dataset=lambada-local", "experiment.eval_limit=3"]
    assert run_job(compose_config([*base, "npu=sm8650"]), store) == "ok"
    assert run_job(compose_config(base), store) == "ok"
    acc = store.read("accuracy")
    scored = acc[acc.metric == "accuracy"]
    htp, fake = (scored[scored.label == label] for label in ("simulated", "stand-in"))
    assert len(htp) == 1 and htp.soc.iloc[0] == "sm8650" and "HTP simulator" in htp.notes.iloc[0]
    assert htp["items"].iloc[0] == 3 and len(fake) == 1 and pd.isna(fake.soc.iloc[0])  # columns, not notes to parse
    assert set(scored.data_source) == {"proxy"}  # the label says what computed it, data_source what it was run on
    assert htp.config_hash.iloc[0] != fake.config_hash.iloc[0]


def test_an_a16_artifacts_ttft_is_measured_by_our_runtime(tmp_path, tiny_checkpoint):
    """Mixed A8/A16 artifacts run in the runtime's accelerator lane (A16 kernels, requantized outputs): their cold
    TTFT is measured like any other, no longer "not run"."""
    store = ResultsStore(tmp_path / "runs")
    cfg = compose_config(["experiment=ttft", "system=edgeflow", *tiny(tiny_checkpoint), "+quantizer.a16_budget=0.5",
                          "+experiment.extra.prompt_tokens=24", "+experiment.extra.n_prompts=1",
                          "protocol.repetitions=1", "protocol.warmup_runs=0", "protocol.busy_policy=flag"])
    assert run_job(cfg, store) == "ok"
    rows = store.read("ttft")
    ttft = rows[rows.metric == "ttft_s"]
    assert len(ttft) == 1 and ttft.value.iloc[0] > 0
