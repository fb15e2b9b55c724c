"""Where QNN HTP cannot run, an NPU experiment's row says "not run" and why (a module of its own: test_kinds.py is
skipped wherever HTP is unavailable, which is exactly where this must hold)."""
import pytest

from harness.runner.job import run_job
from harness.runner.store import ResultsStore
from harness.runner.sweep import compose_config

pytestmark = pytest.mark.real_model


def test_without_htp_the_rows_say_not_run(tmp_path, tiny_checkpoint, monkeypatch):
    from harness.npu import htp

    monkeypatch.setattr(htp.platform, "machine", lambda: "aarch64")
    store = ResultsStore(tmp_path / "runs")
    point = ["experiment=npu_oracle", "model.name=tiny-npu-test", f"model.path={tiny_checkpoint}", "model.source=hf",
             "quantizer=edgeflow", "quantizer.budget_bits=6"]
    assert run_job(compose_config(point), store) == "not run"
    row = store.read("npu_oracle").iloc[0]
    assert row["label"] == "not run" and "x86-64 Linux only" in row["error"]
