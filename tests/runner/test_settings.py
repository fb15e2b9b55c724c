"""Each experiment kind's settings are typed (harness/runner/settings.py): every conf/experiment/*.yaml and every
sweep's override composes into its kind's dataclass, and an unknown key or a bad value is an error naming it."""
from pathlib import Path

import pytest

from harness.config import ConfigError
from harness.runner.job import prepare_job
from harness.runner.kinds import KINDS
from harness.runner.settings import FidelitySettings, TtftSettings
from harness.runner.sweep import compose_config

EXPERIMENTS = sorted(p.stem for p in (Path(__file__).resolve().parents[2] / "conf" / "experiment").glob("*.yaml"))


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_every_experiment_config_composes_into_its_kinds_settings(name):
    job = prepare_job(compose_config([f"experiment={name}"]))
    assert isinstance(job.settings, KINDS[job.experiment.kind].settings)


def test_values_reach_the_kind_typed():
    job = prepare_job(compose_config(["experiment=completion", "experiment.extra.prompt_tokens=64"]))
    assert job.settings == TtftSettings(bits=8, prompt_tokens=64, n_prompts=1, gen_tokens=512)
    job = prepare_job(compose_config(["experiment=fidelity", "+experiment.extra.fidelity_text=python-docs"]))
    assert job.settings == FidelitySettings(fidelity_text="python-docs")


@pytest.mark.parametrize("overrides, message", [
    (["experiment=perplexity", "+experiment.extra.ppl_windw=1024"], r"unknown key\(s\) \['ppl_windw'\]"),
    (["experiment=perplexity", "experiment.extra.ppl_source=wiki"], "ppl_source must be local or wikitext2"),
    (["experiment=ttft", "+experiment.extra.gen_tokens=0"], "gen_tokens must be a positive integer"),
    (["experiment=ttft", "experiment.extra.prompt_tokens=12.5"], "prompt_tokens must be a positive integer or null"),
    (["experiment=accuracy", "+experiment.extra.bits=32"], r"bits must lie in \(0, 16\]"),
    (["experiment=npu_oracle", "experiment.extra.oracle_layers=[0,-1]"], "oracle_layers must be null or a list"),
    (["experiment=smoke", "+experiment.extra.anything=1"], r"unknown key\(s\) \['anything'\]"),
    (["experiment=npu_compile", "+experiment.extra.ppl_windw=1"], r"unknown key\(s\) \['ppl_windw'\]"),
    (["experiment=npu_compile", "experiment.extra.split=mllm"], "split must be one of edgeflow, llmnpu"),
])
def test_a_bad_setting_names_its_key_before_any_work(overrides, message):
    with pytest.raises(ConfigError, match=message):
        prepare_job(compose_config(overrides))


def test_a_key_of_another_kind_is_left_alone_in_a_mixed_sweep():
    job = prepare_job(compose_config(["experiment=accuracy", "++experiment.extra.ppl_window=128"]))
    assert not hasattr(job.settings, "ppl_window")
    assert prepare_job(compose_config(["experiment=perplexity", "++experiment.extra.ppl_window=128"])) \
        .settings.ppl_window == 128
