"""A quantizer's settings for an NPU's numerics: what `quantizer=edgeflow npu=<soc>` alone selects (issue 52).

conf/npu_recipe/<quantizer name>.yaml holds quantizer keys. A run that selects an NPU takes them as the defaults of
the keys its quantizer config leaves out: the quantizer's YAML and the command line (`+quantizer.<key>=...`) win,
`+npu.quantizer_recipe=false` turns the recipe off, and a quantizer without a file is left as it is. A new SoC is its
conf/npu YAML alone: the recipe is the same for every SoC (HTP's numerics do not depend on it). Applied when a job
is prepared (harness/runner/job.py), before the configuration is hashed, so the store and the artifact's manifest
carry every key the quantizer ran with.
"""
from __future__ import annotations

import copy
import sys

from omegaconf import DictConfig, OmegaConf, open_dict

from harness.npu.config import npu_of
from harness.registry import conf_group


def recipe_for(quantizer_name: str, budget_bits: float | None = None) -> dict:
    """conf/npu_recipe/<quantizer_name>.yaml as quantizer keys, with its `from_budget_bits` entry for `budget_bits`
    applied (the largest threshold at most `budget_bits`); {} if that quantizer has none."""
    path = conf_group("npu_recipe") / f"{quantizer_name}.yaml"
    recipe = OmegaConf.to_container(OmegaConf.load(path)) if path.is_file() else {}
    steps = sorted((float(bits), keys) for bits, keys in (recipe.pop("from_budget_bits", None) or {}).items())
    reached = [keys for bits, keys in steps if budget_bits is not None and budget_bits >= bits]
    return {**recipe, **(reached[-1] if reached else {})}


def recipe_overrides(quantizer_name: str, budget_bits: float) -> list[str]:
    """The recipe as command-line overrides, for points that measure the same artifact without running on the NPU
    (a TTFT or an accuracy by our runtime): `npu` selects the recipe only where it is given."""
    return [f"+quantizer.{key}={value}" for key, value in recipe_for(quantizer_name, budget_bits).items()]


def with_npu_recipe(cfg: DictConfig) -> DictConfig:
    """`cfg` with its quantizer's NPU recipe filled in where the run selects an NPU; `cfg` itself otherwise."""
    quantizer = cfg.get("quantizer")
    if cfg.get("npu") is None or quantizer is None or not npu_of(cfg).quantizer_recipe:
        return cfg
    recipe = recipe_for(str(quantizer.get("name")), quantizer.get("budget_bits"))
    missing = {k: v for k, v in recipe.items() if k not in quantizer}
    if not missing:
        return cfg
    out = copy.deepcopy(cfg)
    with open_dict(out.quantizer):
        out.quantizer.merge_with(missing)
    print(f"[edgeflow-bench] npu={cfg.npu.name}: quantizer {quantizer.name} with conf/npu_recipe/{quantizer.name}.yaml "
          f"({' '.join(f'{k}={v}' for k, v in missing.items())}; +npu.quantizer_recipe=false for the paper's)",
          file=sys.stderr)
    return out
