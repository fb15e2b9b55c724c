"""`python -m harness`: the Hydra app. One run measures one configuration; --multirun sweeps.

Examples:
  python -m harness experiment=smoke
  python -m harness --multirun system=llamacpp,mnn dataset=lambada,hellaswag experiment=ttft
  python -m harness quantizer=edgeflow quantizer.budget_bits=4.5 experiment=perplexity
"""
from __future__ import annotations

import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from harness.config import ConfigError

CONF_DIR = str(Path(__file__).resolve().parents[1] / "conf")


@hydra.main(config_path=CONF_DIR, config_name="config", version_base=None)
def main(cfg: DictConfig) -> None:
    from harness.runner.job import run_job

    try:
        status = run_job(cfg)
    except ConfigError as e:
        print(f"configuration error: {e}", file=sys.stderr)
        sys.exit(2)
    print(f"[edgeflow-bench] {cfg.experiment.name}: {status}", file=sys.stderr)
    # A failed configuration is recorded in the store; a single run also says so by its exit code, while a
    # --multirun sweep goes on to the next configuration.
    if status == "failed" and HydraConfig.get().mode != RunMode.MULTIRUN:
        sys.exit(1)


if __name__ == "__main__":
    main()
