"""Run one configuration: validate it, skip it when already measured, measure, and store one row per measurement.

Every Hydra job (`python -m harness ...`, each point of a --multirun sweep) and every point of an experiment's sweep
goes through `run_job`. What is measured depends on `experiment.kind` (harness/runner/kinds.py).
"""
from __future__ import annotations

import contextlib
import functools
import json
import sys
import traceback
from dataclasses import dataclass, field

from omegaconf import DictConfig

from harness.config import ConfigError, build, require
from harness.host import heap_kept
from harness.models.zoo import ModelSpec
from harness.runner import provenance
from harness.runner.identity import measurement_hash
from harness.runner.store import FAILED, NOT_RUN, OK, ResultsStore


@dataclass
class ExperimentConfig:
    name: str
    kind: str
    repetitions: int = 1
    eval_limit: int | None = None  # items per accuracy task (None = all)
    ppl_max_windows: int | None = None  # perplexity windows (None = all)
    # A quantized model's perplexity stops adding windows once the 95% interval of its mean per-window NLL difference
    # from FP16 is within this many nats (or 10% of the difference); None = every window (harness/eval/
    # sized_perplexity.py). The FP16 model itself always scores every window: its mean is what the differences add to.
    ppl_halfwidth: float | None = None
    notes: str = ""
    extra: dict = field(default_factory=dict)  # the kind's settings, typed in harness/runner/settings.py
    settings: object = field(init=False, repr=False)  # `extra` validated as the kind's settings dataclass

    def __post_init__(self):
        from harness.runner.kinds import KINDS, settings_of

        require(self.kind in KINDS, "experiment.kind", f"must be one of {sorted(KINDS)}, got {self.kind!r}")
        require(self.repetitions >= 1, "experiment.repetitions", f"must be >= 1, got {self.repetitions}")
        self.settings = settings_of(self.kind, self.extra)
        require(self.ppl_halfwidth is None or float(self.ppl_halfwidth) > 0, "experiment.ppl_halfwidth",
                f"must be a positive number of nats or null, got {self.ppl_halfwidth}")


@dataclass
class Job:
    """A validated configuration and what every row it writes shares."""

    cfg: DictConfig
    experiment: ExperimentConfig
    model: ModelSpec
    config_hash: str
    extra_rows: list[dict] = field(default_factory=list)  # rows a helper measured on the way (e.g. artifact size)

    @property
    def settings(self):
        """The kind's typed settings (harness/runner/settings.py)."""
        return self.experiment.settings

    def take_extra_rows(self) -> list[dict]:
        rows, self.extra_rows = self.extra_rows, []
        return rows

    @functools.cached_property
    def _config_fields(self) -> dict:
        """The row fields the configuration names (read once: OmegaConf lookups cost ~1.5 ms per row, and a TTFT
        job writes hundreds of rows)."""
        out = {}
        for group, key in (("system", "name"), ("quantizer", "name"), ("packing", "layout"), ("pipeline", "name"),
                           ("dataset", "name"), ("device", "name")):
            node = self.cfg.get(group)
            if group == "device" and node is not None and node.get("id"):
                key = "id"  # a named device (+device.id=phone-a): rows say which one
            if node is not None and node.get(key) is not None:
                out[group] = str(node[key])
        if self.cfg.get("quantizer") is not None and self.cfg.quantizer.get("budget_bits") is not None:
            out["bits"] = float(self.cfg.quantizer.budget_bits)
        if self.cfg.get("pipeline") is not None and self.cfg.pipeline.get("chunk") is not None:
            out["variant"] = f"chunk {int(self.cfg.pipeline.chunk)}"  # policies compare only at one chunk size
        return out

    def row(self, metric: str, value, unit: str, **fields) -> dict:
        base = {
            "model": self.model.name, "config_hash": self.config_hash, "metric": metric,
            "value": None if value is None else float(value), "unit": unit, "status": OK, "label": "measured",
            "repetition": 0, "git_commit": provenance.git_commit(), "host": provenance.host(),
            "time": provenance.now(), **self._config_fields,
        }
        row = {**base, **fields}
        if self.model.source == "random":  # a paper shape with random weights: every row says so
            from harness.models.random_shape import RECIPE_TEXT

            row["notes"] = "; ".join(x for x in (RECIPE_TEXT, row.get("notes")) if x)
        return row


def prepare_job(cfg: DictConfig) -> Job:
    """Validate every group; raises ConfigError naming the bad key before any work starts."""
    from harness.npu.recipe import with_npu_recipe
    from harness.runner.schemas import validate_groups

    cfg = with_npu_recipe(cfg)  # before hashing: the store identifies the quantizer it ran
    experiment = build(ExperimentConfig, cfg.experiment, "experiment")
    model = build(ModelSpec, cfg.model, "model")
    validate_groups(cfg)
    return Job(cfg=cfg, experiment=experiment, model=model, config_hash=measurement_hash(cfg))


def run_job(cfg: DictConfig, store: ResultsStore | None = None) -> str:
    """Measure one configuration; returns its status (ok / failed / not run / skipped)."""
    from harness.runner.kinds import KINDS
    from harness.systems.base import NotRun

    job = prepare_job(cfg)
    store = store or ResultsStore(cfg.run.results_dir)
    name = job.experiment.name
    if cfg.run.resume and job.config_hash in store.completed(name):
        print(f"[edgeflow-bench] {name} {job.config_hash}: already measured, skipping (run.resume=false to redo)",
              file=sys.stderr)
        return "skipped"
    rows: list[dict] = []
    try:
        kind = KINDS[job.experiment.kind]
        with heap_kept() if kind.in_process else contextlib.nullcontext():
            for row in kind.measure(job):
                rows.append(row)
        status = OK
    except NotRun as e:
        rows = [job.row("not_run", None, "", status=NOT_RUN, label="not run", error=str(e))]
        status = NOT_RUN
    except ConfigError:
        raise
    except Exception as e:  # recorded, and the sweep goes on (unless run.fail_fast)
        tail = traceback.format_exc(limit=3)[-2000:]
        print(f"[edgeflow-bench] {name} {job.config_hash} failed: {type(e).__name__}: {e}", file=sys.stderr)
        # Rows measured before the failure are kept; the failed row makes the configuration count as not done.
        rows.append(job.row("error", None, "", status=FAILED, label="not run", error=f"{type(e).__name__}: {e}\n{tail}"))
        status = FAILED
        if cfg.run.fail_fast:
            store.append(name, rows)
            raise
    store.append(name, rows)
    return status


def describe(row: dict) -> str:
    return json.dumps({k: row.get(k) for k in ("metric", "value", "unit", "label")})
