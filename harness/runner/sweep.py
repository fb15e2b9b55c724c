"""Run a list of configurations (each a list of Hydra overrides) with a progress bar, resumably.

The experiment modules (experiments/) declare their sweeps as override lists and run them here; a user's
`python -m harness --multirun ...` reaches the same `run_job` through Hydra's launchers instead.
"""
from __future__ import annotations

import collections
import sys

from hydra import compose, initialize_config_dir
from tqdm import tqdm

from harness import registry
from harness.config import ConfigError
from harness.runner.job import prepare_job, run_job
from harness.runner.store import ResultsStore


def compose_config(overrides: list[str]):
    with initialize_config_dir(config_dir=str(registry.CONF_DIR), version_base=None):
        return compose(config_name="config", overrides=list(overrides))


def run_sweep(points: list[list[str]], store: ResultsStore | None = None, desc: str = "sweep") -> collections.Counter:
    """Validate every point first (a bad one fails before any work), then run them in order."""
    cfgs = []
    for overrides in points:
        try:
            cfg = compose_config(overrides)
            prepare_job(cfg)
        except ConfigError as e:
            raise ConfigError(f"{' '.join(overrides)}: {e}") from None
        cfgs.append(cfg)
    counts: collections.Counter = collections.Counter()
    bar = tqdm(cfgs, desc=desc, unit="config", file=sys.stderr)
    for overrides, cfg in zip(points, bar):
        bar.set_postfix_str(" ".join(o for o in overrides if not o.startswith("experiment="))[:60])
        counts[run_job(cfg, store)] += 1
    return counts
