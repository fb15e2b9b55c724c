"""Every default the runtime's callers share is defined once: in C++ in edgeflow_runtime/src/engine/defaults.h, in
Python in harness/engine/run.py (the same values, checked here); the Python callers take it from there, and the config
files that must spell it (Hydra overrides need the key) hold the same value. A default spelled anywhere else fails."""
import functools
import inspect
import re
from pathlib import Path

import pytest
import yaml

from harness.engine.capi import NativeEngine
from harness.engine.run import (DEFAULT_CHUNK, DEFAULT_POLICY, DEFAULT_STEAL_THRESHOLD, DEFAULT_THREADS, command,
                                run_edgeflow)
from harness.pipeline_sim import simulate
from harness.systems.base import SystemConfig
from harness.systems.edgeflow import PipelineConfig

REPO = Path(__file__).resolve().parents[1]
CONF = REPO / "conf"
ENGINE = REPO / "edgeflow_runtime" / "src" / "engine"


@functools.cache
def native_defaults() -> dict[str, object]:
    """defaults.h's constants: {"kThreads": 2, "kPolicy": "place+priority+steal", ...}."""
    text = (ENGINE / "defaults.h").read_text()
    found = re.findall(r'constexpr \w[\w\s*]* (k\w+) = ("[^"]*"|\d+);', text)
    return {name: value.strip('"') if value.startswith('"') else int(value) for name, value in found}


def test_python_and_the_engine_share_the_defaults():
    assert native_defaults() == {"kThreads": DEFAULT_THREADS, "kChunk": DEFAULT_CHUNK,
                                 "kStealThreshold": DEFAULT_STEAL_THRESHOLD, "kPolicy": DEFAULT_POLICY}


@functools.cache
def literal_default() -> re.Pattern:
    """A default written as a literal: an options struct's initializer, or a help text's "(default V)" for one of
    defaults.h's values."""
    helps = "|".join(re.escape(str(v)) for v in native_defaults().values())
    return re.compile(rf"\b(threads|chunk|steal_threshold)\s*=\s*\d+\s*;|policy\s*=\s*\"|\(default ({helps})[);]")


def spelled(line: str) -> bool:
    """Whether `line` writes one of defaults.h's values as a literal default."""
    return bool(literal_default().search(line))


def test_the_engine_spells_each_default_once():
    sources = [p for p in ENGINE.glob("*.[ch]*") if p.name != "defaults.h"]  # (not tests/ and bench/: they may)
    found = [f"{p.name}:{i}: {line.strip()}" for p in sources
             for i, line in enumerate(p.read_text().splitlines(), 1) if spelled(line)]
    assert len(sources) > 10 and not found, found


def test_the_spelling_check_finds_a_literal_default():
    assert spelled("    int chunk = 128;        // prompt tokens per chunk")
    assert spelled("  --chunk N   prefill chunk size in tokens (default 128)")
    assert spelled('    std::string policy = "place+priority+steal";')
    assert not spelled("    int chunk = defaults::kChunk;") and not spelled("  --io-threads N  (default 1)")


def test_python_callers_take_the_defaults_from_one_place():
    assert PipelineConfig().chunk == DEFAULT_CHUNK and PipelineConfig().name == DEFAULT_POLICY
    assert PipelineConfig().steal_threshold == DEFAULT_STEAL_THRESHOLD
    assert inspect.signature(NativeEngine.set_schedule).parameters["steal_threshold"].default == DEFAULT_STEAL_THRESHOLD
    sim = inspect.signature(simulate).parameters
    assert (sim["threads"].default, sim["steal_threshold"].default) == (DEFAULT_THREADS, DEFAULT_STEAL_THRESHOLD)
    assert SystemConfig().threads == DEFAULT_THREADS
    for fn in (NativeEngine.open, NativeEngine.from_artifact):
        params = inspect.signature(fn).parameters
        assert (params["threads"].default, params["chunk"].default) == (DEFAULT_THREADS, DEFAULT_CHUNK)
    for fn in (command, run_edgeflow):
        assert inspect.signature(fn).parameters["threads"].default == DEFAULT_THREADS


@pytest.mark.parametrize("path", sorted(p.name for p in (CONF / "pipeline").glob("*.yaml")))
def test_pipeline_configs_hold_the_default_chunk_and_steal_threshold(path):
    cfg = yaml.safe_load((CONF / "pipeline" / path).read_text())
    assert (cfg["chunk"], cfg["steal_threshold"]) == (DEFAULT_CHUNK, DEFAULT_STEAL_THRESHOLD)


@pytest.mark.parametrize("path", sorted(p.name for p in (CONF / "system").glob("*.yaml")))
def test_system_configs_hold_the_default_thread_budget(path, monkeypatch):
    from omegaconf import OmegaConf

    monkeypatch.delenv("EDGEFLOW_THREADS", raising=False)  # a local pool's share (experiments/multirun.py)
    cfg = OmegaConf.load(CONF / "system" / path)
    assert cfg.get("threads", DEFAULT_THREADS) == DEFAULT_THREADS
