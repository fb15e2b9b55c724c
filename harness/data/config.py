"""The dataset config group (conf/dataset/*.yaml), validated before any work starts.

A dataset is evaluated through exactly one of: a builtin lm-eval task (`lm_eval_task`, needs the hub) or a local
proxy task generated from the corpus (`local_task`). Its TTFT prompts are `n_prompts` prompts whose token counts lie
in [prompt_tokens_min, prompt_tokens_max] (paper Table 3), drawn with `seed`.
"""
from __future__ import annotations

from dataclasses import dataclass

from harness.config import build, require
from harness.data.tasks import LOCAL_TASKS

BUILTIN_TASKS = ("lambada_openai", "winogrande", "openbookqa", "mmlu", "hellaswag")


@dataclass(frozen=True)
class DatasetConfig:
    name: str
    shots: int  # few-shot examples in each accuracy prompt (paper Table 3 for the builtin tasks)
    prompt_tokens_min: int
    prompt_tokens_max: int
    lm_eval_task: str | None = None
    local_task: str | None = None
    local_items: int = 500  # items generated for a local task
    n_prompts: int = 20
    seed: int = 1234
    paper_name: str = ""  # the dataset's name in the paper's tables and figures

    def __post_init__(self):
        require((self.lm_eval_task is None) != (self.local_task is None), "dataset.lm_eval_task/local_task",
                f"must have exactly one set, got lm_eval_task={self.lm_eval_task!r}, local_task={self.local_task!r}")
        require(self.lm_eval_task in (None, *BUILTIN_TASKS), "dataset.lm_eval_task",
                f"must be one of {BUILTIN_TASKS}, got {self.lm_eval_task!r}")
        require(self.local_task in (None, *LOCAL_TASKS), "dataset.local_task",
                f"must be one of {LOCAL_TASKS}, got {self.local_task!r}")
        for key in ("shots", "prompt_tokens_min", "prompt_tokens_max", "local_items", "n_prompts", "seed"):
            value = getattr(self, key)
            require(isinstance(value, int) and not isinstance(value, bool), f"dataset.{key}",
                    f"must be an integer, got {value!r}")
        require(self.shots >= 0, "dataset.shots", f"must be >= 0, got {self.shots}")
        require(self.local_task is None or self.shots == 0, "dataset.shots",
                f"must be 0 for a local task (they have no few-shot split), got {self.shots}")
        require(self.local_items >= 1, "dataset.local_items", f"must be >= 1, got {self.local_items}")
        require(self.n_prompts >= 1, "dataset.n_prompts", f"must be >= 1, got {self.n_prompts}")
        require(1 <= self.prompt_tokens_min <= self.prompt_tokens_max, "dataset.prompt_tokens_min",
                f"must satisfy 1 <= prompt_tokens_min ({self.prompt_tokens_min}) <= prompt_tokens_max "
                f"({self.prompt_tokens_max})")


def load_dataset_config(name: str) -> DatasetConfig:
    """conf/dataset/<name>.yaml as a validated DatasetConfig (as the Hydra app builds `dataset=<name>`)."""
    from omegaconf import OmegaConf

    from harness.registry import conf_group

    path = conf_group("dataset") / f"{name}.yaml"
    if not path.is_file():
        choices = sorted(p.stem for p in conf_group("dataset").glob("*.yaml"))
        raise ValueError(f"no dataset config {name!r}; choose one of {choices}")
    return build(DatasetConfig, OmegaConf.load(path), "dataset")
