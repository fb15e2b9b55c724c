import os
import signal
import subprocess
import sys
import textwrap
import time

import pandas as pd
import pytest

from harness.runner.store import FAILED, NOT_RUN, OK, ResultsStore


def test_append_and_read_roundtrip(tmp_path):
    store = ResultsStore(tmp_path)
    store.append("e", [{"metric": "ttft_s", "value": 1.5, "unit": "s", "status": OK, "label": "measured",
                          "config_hash": "a"}])
    store.append("e", [{"metric": "ttft_s", "value": 2.5, "unit": "s", "status": OK, "label": "measured",
                          "config_hash": "b"}])
    df = store.read("e")
    assert list(df["value"]) == [1.5, 2.5]
    assert set(df["experiment"]) == {"e"}
    assert store.read("missing").empty


def test_unknown_column_is_an_error(tmp_path):
    with pytest.raises(KeyError, match="unknown columns"):
        ResultsStore(tmp_path).append("e", [{"metrc": "typo"}])


def test_completed_retries_a_configuration_whose_latest_attempt_failed(tmp_path):
    store = ResultsStore(tmp_path)
    store.append("e", [{"config_hash": "a", "status": OK, "label": "measured"},
                       {"config_hash": "b", "status": FAILED, "label": "not run"}])
    assert store.completed("e") == {"a"}
    store.append("e", [{"config_hash": "b", "status": OK, "label": "measured"}])
    assert store.completed("e") == {"a", "b"}
    store.append("e", [{"config_hash": "a", "status": OK, "label": "measured"},
                       {"config_hash": "a", "status": FAILED, "label": "not run"}])
    assert store.completed("e") == {"b"}


def test_completed_retries_a_configuration_that_was_not_run(tmp_path):
    store = ResultsStore(tmp_path)
    store.append("e", [{"config_hash": "c", "status": NOT_RUN, "label": "not run", "error": "no phone"}])
    assert store.completed("e") == set()  # its reason may have gone: the next sweep asks again


def test_kill_mid_write_leaves_the_store_readable(tmp_path):
    # A writer appends big batches in a loop; SIGKILL lands at an arbitrary point of some write.
    writer = textwrap.dedent(f"""
        from harness.runner.store import ResultsStore
        store = ResultsStore({str(tmp_path)!r})
        rows = [{{"metric": "m", "value": float(i), "notes": "x" * 200, "config_hash": "h", "label": "measured"}}
                for i in range(20000)]
        while True:
            store.append("e", rows)
    """)
    proc = subprocess.Popen([sys.executable, "-c", writer], env={**os.environ, "PYTHONPATH": os.getcwd()})
    deadline = time.monotonic() + 60
    while len(list((tmp_path / "e").glob("part-*.parquet"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.13)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    df = ResultsStore(tmp_path).read("e")
    parts = list((tmp_path / "e").glob("part-*.parquet"))
    assert len(parts) >= 2
    assert len(df) == 20000 * len(parts)  # every visible part is complete


def test_labels_are_one_closed_vocabulary_that_agrees_with_the_row(tmp_path):
    from harness.runner.store import LABELS

    store = ResultsStore(tmp_path)
    assert set(LABELS) == {"measured", "emulated", "simulated", "proxy", "stand-in", "not run"}
    with pytest.raises(ValueError, match="label 'guessed' is not one of"):
        store.append("e", [{"metric": "m", "value": 1.0, "status": OK, "label": "guessed"}])
    with pytest.raises(ValueError, match="status 'failed' needs label 'not run'"):
        store.append("e", [{"metric": "error", "status": FAILED, "label": "measured"}])
    with pytest.raises(ValueError, match="label 'not run' on a row whose status is ok"):
        store.append("e", [{"metric": "m", "value": 1.0, "status": OK, "label": "not run"}])
    assert store.read("e").empty  # nothing of a refused batch is written


def test_older_simulator_rows_read_as_simulated(tmp_path):
    """The pipeline simulator's rows were labelled 'emulated' (a word for throttled flash) before 'simulated' existed:
    a store written then reads in today's vocabulary; measured emulated rows stay emulated."""
    store = ResultsStore(tmp_path)
    store.append("pipeline", [{"metric": "sim_latency_s", "value": 0.2, "label": "emulated"},
                              {"metric": "ttft_s", "value": 0.5, "label": "emulated", "flash_emulated_mbps": 200.0}])
    rows = store.read("pipeline").set_index("metric")
    assert rows.loc["sim_latency_s", "label"] == "simulated" and rows.loc["ttft_s", "label"] == "emulated"


def test_older_npu_rows_get_soc_split_layer_and_stage_from_their_variant(tmp_path):
    """The NPU experiments named SoC, split, layer and stage in one variant string before they had columns: a store
    written then reads with the columns (and the variant keeps only the model-wide scope); other variants stay."""
    store = ResultsStore(tmp_path)
    old = ["sm8750 layer 3", "sm8750 llm.npu layer 0", "sm8750 llm.npu all layers", "sm8650 one graph",
           "sm8750 layer 2 ffn_in"]
    store.append("npu_compile", [{"experiment": "npu_compile", "metric": "qnn_compile_s", "value": 1.0, "variant": v,
                          "label": "measured"} for v in old]
                 + [{"experiment": "bench-unpack", "metric": "gbps", "value": 1.0, "variant": "avx2",
                     "label": "measured"}])
    rows = store.read("npu_compile")
    got = [tuple(None if pd.isna(x) else x for x in (r.soc, r.npu_split, r.layer, r.stage, r.variant))
           for r in rows.itertuples()]
    assert got[:5] == [("sm8750", "edgeflow", 3, None, None), ("sm8750", "llmnpu", 0, None, None),
                       ("sm8750", "llmnpu", None, None, "all layers"), ("sm8650", "edgeflow", None, None, "one graph"),
                       ("sm8750", "edgeflow", 2, "ffn_in", None)]
    assert got[5] == (None, None, None, None, "avx2")


def test_older_fake_quant_rows_read_as_stand_ins_on_proxy_data(tmp_path):
    """Before data_source was a column, 'proxy' in the label was the only trace of a local dataset, and the fake-quant
    model's quality rows were labelled measured or proxy: they read as stand-ins, their proxy data kept; FP16's rows,
    an engine's and the FP16 reference windows of a quantized job keep their labels."""
    from experiments.selection import dataset_source, labels

    store = ResultsStore(tmp_path)
    old = dict(value=0.5, unit="fraction", status=OK, dataset="lambada")
    store.append("accuracy", [
        {**old, "metric": "accuracy", "quantizer": "cmpq", "label": "proxy", "config_hash": "fake"},
        {**old, "metric": "accuracy", "quantizer": "fp16", "label": "proxy", "config_hash": "fp16"},
        {**old, "metric": "accuracy", "system": "edgeflow", "quantizer": "edgeflow", "label": "proxy",
         "config_hash": "engine"},
        {**old, "metric": "effective_bits", "quantizer": "cmpq", "label": "measured", "config_hash": "fake"},
        {**old, "metric": "window_nll_ref", "quantizer": "cmpq", "label": "measured", "config_hash": "ref"},
        {**old, "metric": "kl_fp16", "quantizer": "cmpq", "label": "measured", "config_hash": "kl"}])
    rows = store.read("accuracy")
    assert rows["label"].tolist() == ["stand-in", "proxy", "proxy", "measured", "measured", "stand-in"]
    assert "stand-in: the fake-quant torch model in place of an integer engine" in labels(rows.assign(device=None))
    assert dataset_source(rows).tolist() == ["proxy"] * 3 + ["builtin"] * 3


def test_the_report_header_says_simulated_not_flash_emulated():
    import pandas as pd

    from experiments import selection

    sim = pd.DataFrame([{"device": "local", "flash_emulated_mbps": None, "label": "simulated", "metric": "sim_latency_s",
                         "value": 0.2, "notes": "", "status": "ok"}])
    tags = selection.labels(sim)
    assert any(t.startswith("simulated: the pipeline simulator") for t in tags)
    assert not any("flash emulated" in t for t in tags), tags


def test_older_accuracy_rows_get_their_stderr_from_the_notes(tmp_path):
    """Before lm-eval's standard error was a column, an accuracy row's notes said it ("..., stderr=0.0321; ...")."""
    store = ResultsStore(tmp_path)
    common = {"experiment": "accuracy", "metric": "accuracy", "value": 0.5, "status": OK, "label": "proxy"}
    store.append("accuracy", [{**common, "config_hash": "a", "notes": "lm-eval task t metric acc, n=100, shots=0, "
                                                                        "stderr=0.0321; scored by x"},
                              {**common, "config_hash": "b", "notes": "n=100, shots=0, stderr=None; scored by x"},
                              {**common, "config_hash": "c", "stderr": 0.05, "notes": "n=100; scored by x"}])
    got = store.read("accuracy").set_index("config_hash")["stderr"]
    assert got["a"] == pytest.approx(0.0321) and pd.isna(got["b"]) and got["c"] == pytest.approx(0.05)
