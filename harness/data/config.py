"""The dataset config group (conf/dataset/*.yaml), validated before any work starts.

A dataset is evaluated through exactly one of: a builtin lm-eval task (`lm_eval_task`, needs the hub) or a local
proxy task generated from the corpus (`local_task`). Its TTFT prompts are `n_prompts` prompts whose token counts lie
in [prompt_tokens_min, prompt_tokens_max] (paper Table 3), drawn with `seed`.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

import yaml

from harness.data.tasks import LOCAL_TASKS

CONF_DIR = Path(__file__).resolve().parents[2] / "conf" / "dataset"
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
        where = f"dataset {self.name!r}"
        if (self.lm_eval_task is None) == (self.local_task is None):
            raise ValueError(f"{where}: set exactly one of dataset.lm_eval_task and dataset.local_task")
        if self.lm_eval_task is not None and self.lm_eval_task not in BUILTIN_TASKS:
            raise ValueError(f"{where}: dataset.lm_eval_task must be one of {BUILTIN_TASKS}, got {self.lm_eval_task!r}")
        if self.local_task is not None and self.local_task not in LOCAL_TASKS:
            raise ValueError(f"{where}: dataset.local_task must be one of {LOCAL_TASKS}, got {self.local_task!r}")
        if self.local_task is not None and self.shots != 0:
            raise ValueError(f"{where}: local tasks have no few-shot split; dataset.shots must be 0, got {self.shots}")
        for key in ("shots", "prompt_tokens_min", "prompt_tokens_max", "local_items", "n_prompts", "seed"):
            value = getattr(self, key)
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"{where}: dataset.{key} must be an integer, got {value!r}")
        if self.shots < 0 or self.local_items < 1 or self.n_prompts < 1:
            raise ValueError(f"{where}: dataset.shots must be >= 0, dataset.local_items and dataset.n_prompts >= 1")
        if not 1 <= self.prompt_tokens_min <= self.prompt_tokens_max:
            raise ValueError(f"{where}: need 1 <= dataset.prompt_tokens_min ({self.prompt_tokens_min}) <= "
                             f"dataset.prompt_tokens_max ({self.prompt_tokens_max})")

    @classmethod
    def from_dict(cls, values: dict) -> "DatasetConfig":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"dataset config has unknown keys {unknown}; allowed: {sorted(known)}")
        return cls(**values)


def load_dataset_config(name: str) -> DatasetConfig:
    """conf/dataset/<name>.yaml as a validated DatasetConfig."""
    path = CONF_DIR / f"{name}.yaml"
    if not path.is_file():
        choices = sorted(p.stem for p in CONF_DIR.glob("*.yaml"))
        raise ValueError(f"no dataset config {name!r}; choose one of {choices}")
    return DatasetConfig.from_dict(yaml.safe_load(path.read_text()))
