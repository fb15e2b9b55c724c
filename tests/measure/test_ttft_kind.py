"""experiment=ttft through the lead's runner: config validation, a not-run system, and one real emulated sweep point."""
import pytest

from harness.config import ConfigError
from harness.runner.job import run_job
from harness.runner.store import ResultsStore
from harness.runner.sweep import compose_config

QUICK = ["protocol.repetitions=1", "protocol.warmup_runs=0", "protocol.busy_policy=flag"]


def test_bad_values_name_the_key():
    with pytest.raises(ConfigError, match="system.threads"):
        run_job(compose_config(["experiment=ttft", "system=mnn", "system.threads=0"]))
    with pytest.raises(ConfigError, match="protocol.busy_policy"):
        run_job(compose_config(["experiment=ttft", "system=mnn", "protocol.busy_policy=never"]))


def test_llmnpu_on_this_host_is_a_not_run_row(tmp_path):
    store = ResultsStore(tmp_path)
    assert run_job(compose_config(["experiment=ttft", "system=llmnpu", *QUICK]), store) == "not run"
    row = store.read("ttft").iloc[0]
    assert row["status"] == "not run" and row["system"] == "llmnpu" and "Android phone" in row["error"]


@pytest.mark.real_model
def test_an_emulated_flash_point_writes_labelled_rows(tmp_path):
    store = ResultsStore(tmp_path)
    cfg = compose_config(["experiment=ttft", "system=llamacpp", "dataset=lambada", "dataset.n_prompts=1",
                          "device.flash_read_mbps=200", *QUICK])
    assert run_job(cfg, store) == "ok"
    df = store.read("ttft")
    ttft = df[df.metric == "ttft_s"].iloc[0]
    assert ttft["value"] > 0 and ttft["label"] == "emulated" and ttft["flash_emulated_mbps"] == 200
    assert ttft["dataset"] == "lambada" and 59 <= ttft["prompt_tokens"] <= 97 and ttft["device"] == "local"
    energy = df[df.metric == "energy_j"].iloc[0]
    assert energy["value"] != energy["value"] and energy["notes"]  # null (NaN), with the reason in notes
