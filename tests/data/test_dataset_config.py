import pytest

from harness.config import ConfigError, build
from harness.data.config import DatasetConfig, load_dataset_config
from harness.registry import conf_group

TABLE3 = {"lambada": (0, 59, 97), "winogrande": (3, 131, 144), "openbookqa": (4, 190, 230), "mmlu": (5, 243, 699),
          "hellaswag": (6, 883, 1086)}


def test_every_dataset_yaml_validates():
    names = sorted(p.stem for p in conf_group("dataset").glob("*.yaml"))
    assert set(TABLE3) | {"lambada-local", "hellaswag-local"} <= set(names)
    for name in names:
        assert load_dataset_config(name).name == name


def test_paper_table3_shots_and_prompt_bands():
    for name, (shots, lo, hi) in TABLE3.items():
        cfg = load_dataset_config(name)
        assert (cfg.shots, cfg.prompt_tokens_min, cfg.prompt_tokens_max) == (shots, lo, hi)
        assert cfg.lm_eval_task is not None and cfg.local_task is None
    for local, paper in (("lambada-local", "lambada"), ("hellaswag-local", "hellaswag")):
        cfg, ref = load_dataset_config(local), load_dataset_config(paper)
        assert cfg.local_task == local and (cfg.prompt_tokens_min, cfg.prompt_tokens_max) == \
            (ref.prompt_tokens_min, ref.prompt_tokens_max)


GOOD = dict(name="x", shots=0, prompt_tokens_min=10, prompt_tokens_max=20, local_task="lambada-local")


@pytest.mark.parametrize("change, message", [
    (dict(prompt_tokens_min=30), "dataset.prompt_tokens_min must satisfy"),
    (dict(lm_eval_task="lambada_openai"), "must have exactly one set"),
    (dict(local_task="mmlu-local"), "dataset.local_task must be one of"),
    (dict(shots=3), "dataset.shots must be 0 for a local task"),
    (dict(n_prompts=0), "dataset.n_prompts must be >= 1"),
    (dict(seed="1"), "dataset.seed must be an integer"),
])
def test_bad_values_name_the_key(change, message):
    with pytest.raises(ValueError, match=message):
        DatasetConfig(**{**GOOD, **change})


def test_unknown_key_and_unknown_dataset_are_named():
    with pytest.raises(ConfigError, match=r"dataset: unknown key\(s\) \['shot'\]"):
        build(DatasetConfig, {**GOOD, "shot": 1}, "dataset")
    with pytest.raises(ValueError, match="no dataset config 'lambda'"):
        load_dataset_config("lambda")


def test_the_app_validates_the_dataset_group():
    from harness.runner.job import prepare_job
    from harness.runner.sweep import compose_config

    assert prepare_job(compose_config(["dataset=hellaswag-local"])).cfg.dataset.name == "hellaswag-local"
    with pytest.raises(ConfigError, match="dataset: dataset.prompt_tokens_min must satisfy"):
        prepare_job(compose_config(["dataset=mmlu", "dataset.prompt_tokens_min=900"]))
