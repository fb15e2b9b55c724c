"""Every default the runtime's callers share is defined once (harness/engine/run.py): the Python callers take it from
there, and the config files that must spell it (Hydra overrides need the key) hold the same value."""
import inspect
from pathlib import Path

import pytest
import yaml

from harness.engine.capi import NativeEngine
from harness.engine.run import DEFAULT_CHUNK, DEFAULT_POLICY, DEFAULT_THREADS, command, run_edgeflow
from harness.systems.base import SystemConfig
from harness.systems.edgeflow import PipelineConfig

CONF = Path(__file__).resolve().parents[1] / "conf"


def test_python_callers_take_the_defaults_from_one_place():
    assert PipelineConfig().chunk == DEFAULT_CHUNK and PipelineConfig().name == DEFAULT_POLICY
    assert SystemConfig().threads == DEFAULT_THREADS
    for fn in (NativeEngine.open, NativeEngine.from_artifact):
        params = inspect.signature(fn).parameters
        assert (params["threads"].default, params["chunk"].default) == (DEFAULT_THREADS, DEFAULT_CHUNK)
    for fn in (command, run_edgeflow):
        assert inspect.signature(fn).parameters["threads"].default == DEFAULT_THREADS


@pytest.mark.parametrize("path", sorted(p.name for p in (CONF / "pipeline").glob("*.yaml")))
def test_pipeline_configs_hold_the_default_chunk(path):
    assert yaml.safe_load((CONF / "pipeline" / path).read_text())["chunk"] == DEFAULT_CHUNK


@pytest.mark.parametrize("path", sorted(p.name for p in (CONF / "system").glob("*.yaml")))
def test_system_configs_hold_the_default_thread_budget(path, monkeypatch):
    from omegaconf import OmegaConf

    monkeypatch.delenv("EDGEFLOW_THREADS", raising=False)  # a local pool's share (experiments/multirun.py)
    cfg = OmegaConf.load(CONF / "system" / path)
    assert cfg.get("threads", DEFAULT_THREADS) == DEFAULT_THREADS
