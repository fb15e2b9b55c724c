"""Sweeps over quantizers and budgets from the command line (harness/overrides.py in front of Hydra)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.config import ConfigError
from harness.overrides import prepare
from harness.runner.store import ResultsStore

REPO = Path(__file__).resolve().parents[2]


def test_a_swept_groups_plain_key_is_applied_per_point():
    args = ["--multirun", "experiment=perplexity", "quantizer=rtn_clip,edgeflow", "quantizer.budget_bits=6"]
    assert prepare(args) == [*args[:3], "quantizer.budget_bits=choice(6)"]


def test_sweeps_and_single_runs_that_hydra_handles_are_left_alone():
    for args in (["--multirun", "quantizer=rtn_clip,edgeflow,cmpq", "quantizer.budget_bits=4,5,6"],
                 ["--multirun", "quantizer=rtn_clip", "quantizer.budget_bits=6", "quantizer.clip_ratio=0.8,0.9"],
                 ["quantizer=rtn_clip", "quantizer.budget_bits=6", "quantizer.clip_ratio=0.8"],
                 ["--multirun", "system=llamacpp,mnn", "dataset=lambada,hellaswag", "experiment=ttft"],
                 ["experiment=smoke"]):
        assert prepare(args) == args


def test_a_key_only_some_swept_quantizers_have_names_the_quantizer_and_the_key():
    with pytest.raises(ConfigError) as e:
        prepare(["--multirun", "quantizer=rtn_clip,edgeflow,cmpq", "quantizer.clip_ratio=0.8,0.9"])
    msg = str(e.value)
    assert "quantizer.clip_ratio" in msg and "'edgeflow'" in msg and "'cmpq'" in msg and "rtn_clip" in msg
    assert "'rtn_clip'" not in msg.split("it is a key of")[0]  # rtn_clip has it: not among the offenders


def test_a_setting_the_yaml_leaves_at_its_default_says_to_add_it_with_plus():
    """a16_budget is a field of every quantizer's Config that edgeflow.yaml and cmpq.yaml leave out: Hydra would say
    "not in struct"; the error names the '+' override that sets it. A key no Config has is still named as absent."""
    with pytest.raises(ConfigError, match=r"leave\(s\) 'a16_budget' at its default; set it with "
                                          r"'\+quantizer\.a16_budget=0\.5'"):
        prepare(["--multirun", "quantizer=edgeflow,cmpq", "quantizer.a16_budget=0.5"])
    with pytest.raises(ConfigError, match=r"has no key 'a16_budgett'.*separate command"):
        prepare(["quantizer=edgeflow", "quantizer.a16_budgett=0.5"])
    assert prepare(["quantizer=edgeflow", "+quantizer.a16_budget=0.5"]) == ["quantizer=edgeflow",
                                                                              "+quantizer.a16_budget=0.5"]


@pytest.mark.parametrize("group,option,key", [("npu", "sm8750", "quantizer_recipe"), ("device", "local", "max_temp_c")])
def test_every_group_with_a_schema_names_the_plus_for_a_key_its_yaml_leaves_out(group, option, key):
    """Not only the quantizer group: a field of an npu or device schema (or a system's) that its YAML leaves out
    gets the same '+' hint (Hydra would say "not in struct")."""
    from omegaconf import OmegaConf

    from harness.registry import CONF_DIR

    assert OmegaConf.select(OmegaConf.load(CONF_DIR / group / f"{option}.yaml"), key, default=None) is None
    with pytest.raises(ConfigError, match=rf"leave\(s\) '{key}' at its default; set it with '\+{group}\.{key}=1'"):
        prepare([f"{group}={option}", f"{group}.{key}=1"])


def test_a_key_without_a_quantizer_says_to_choose_one():
    with pytest.raises(ConfigError, match=r"quantizer\.budget_bits: no quantizer is selected.*rtn_clip"):
        prepare(["--multirun", "experiment=perplexity", "quantizer.budget_bits=4,5"])


def test_the_cli_prints_the_error_and_exits_2_before_any_work(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO), "EDGEFLOW_RESULTS": str(tmp_path / "runs")}
    p = subprocess.run([sys.executable, "-m", "harness", "--multirun", "experiment=perplexity",
                        "quantizer=rtn_clip,edgeflow", "quantizer.clip_ratio=0.8"],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, p.stderr
    assert "configuration error: quantizer.clip_ratio: quantizer 'edgeflow'" in p.stderr
    assert not (tmp_path / "runs").exists()


@pytest.mark.real_model
@pytest.mark.slow
def test_multirun_over_quantizers_budgets_and_own_keys_runs_every_point(tmp_path, tiny_checkpoint, fresh_model_name):
    """The issue's commands, on a tiny random Llama: every point runs and is stored with its own configuration."""
    name = fresh_model_name("tiny-sweep")  # fresh caches: the points really quantize
    store = tmp_path / "runs"
    env = {**os.environ, "PYTHONPATH": str(REPO), "EDGEFLOW_RESULTS": str(store)}
    model = [f"model.name={name}", f"model.path={tiny_checkpoint}", "model.source=hf",
             "experiment=perplexity", "experiment.ppl_max_windows=1", "experiment.extra.ppl_window=128"]

    def multirun(*args):
        p = subprocess.run([sys.executable, "-m", "harness", "--multirun", *model, *args], cwd=REPO, env=env,
                           capture_output=True, text=True, timeout=1200)
        assert p.returncode == 0, p.stderr[-3000:]

    multirun("quantizer=rtn_clip,edgeflow", "quantizer.budget_bits=6")  # the command that failed
    multirun("quantizer=rtn_clip,cmpq", "quantizer.budget_bits=4,5")
    multirun("quantizer=rtn_clip", "quantizer.budget_bits=4", "quantizer.clip_ratio=0.5,0.8")
    rows = ResultsStore(store).read("perplexity")
    ppl = rows[rows.metric == "perplexity"]
    assert (ppl.status == "ok").all() and ppl.value.notna().all()
    points = sorted(zip(ppl.quantizer, ppl.bits))
    assert points == sorted([("rtn_clip", 6.0), ("edgeflow", 6.0)]
                            + [(q, b) for q in ("rtn_clip", "cmpq") for b in (4.0, 5.0)]
                            + [("rtn_clip", 4.0)] * 2)
    assert ppl.config_hash.nunique() == len(ppl)  # clip_ratio 0.5 and 0.8 are two configurations
    clip = ppl[(ppl.quantizer == "rtn_clip") & (ppl.bits == 4.0)]
    assert clip.value.nunique() == 3  # ...that quantize differently (and differ from the YAML's 0.9)
