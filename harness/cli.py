"""`python -m harness`: the Hydra app. One run measures one configuration; --multirun sweeps.

Examples:
  python -m harness experiment=smoke
  python -m harness --multirun system=llamacpp,mnn dataset=lambada,hellaswag experiment=ttft
  python -m harness quantizer=edgeflow quantizer.budget_bits=4.5 experiment=perplexity
  python -m harness --multirun experiment=perplexity quantizer=rtn_clip,edgeflow,cmpq quantizer.budget_bits=4,5,6

Before Hydra sees them, the overrides go through harness/overrides.py: a key of a swept group (quantizer.budget_bits=6
beside quantizer=a,b) is applied per point, and a key that some chosen option lacks is an error naming the option.
"""
from __future__ import annotations

import os
import signal
import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from harness import registry
from harness.config import ConfigError
from harness.overrides import prepare

CONF_DIR = str(registry.CONF_DIR)  # hydra.main takes it once, at import
_FORK_HOOK = False


def _default_sigterm_in_forked_children() -> None:
    """A SLURM task (submitit) ignores SIGTERM in its Python process, and forked children inherit that handler: lm-eval's
    bootstrap `multiprocessing.Pool` then never ends, since `Pool.terminate()` SIGTERMs its workers and joins them (seen:
    an accuracy task hung after its last row). Forked children get the default action back."""
    global _FORK_HOOK
    if not _FORK_HOOK:  # once per process (a local --multirun calls main once per job)
        os.register_at_fork(after_in_child=lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL))
        _FORK_HOOK = True


@hydra.main(config_path=CONF_DIR, config_name="config", version_base=None)
def main(cfg: DictConfig) -> None:
    from harness.runner.job import run_job

    _default_sigterm_in_forked_children()
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


def run() -> None:
    """The console entry point: check and adjust the command line's overrides, then hand them to Hydra."""
    try:
        sys.argv[1:] = prepare(sys.argv[1:])
    except ConfigError as e:
        print(f"configuration error: {e}", file=sys.stderr)
        sys.exit(2)
    main()


if __name__ == "__main__":
    run()
