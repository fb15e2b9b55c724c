"""The contract of a paper artifact (a figure or a table), and the registry that names them.

An artifact module defines its functions and ends with one class that implements either base class, decorated with
@register_artifact; experiments/__init__.py imports every module of the package, so a new artifact is one file
(plus its paper values, results/paper/<NAME>.csv):

    @register_artifact
    class Fig2(SweepArtifact):
        NAME, TITLE, EXPERIMENTS = NAME, TITLE, EXPERIMENTS
        sweep, render = staticmethod(sweep), staticmethod(render)
"""
from __future__ import annotations

import re
from abc import ABC, abstractmethod
from pathlib import Path
from typing import ClassVar

import pandas as pd

from harness.registry import Registry


class Artifact(ABC):
    NAME: ClassVar[str]  # `make reproduce-<NAME>`, results/paper/<NAME>.csv, results/figures/<NAME>.png
    TITLE: ClassVar[str]  # the report's heading
    EXPERIMENTS: ClassVar[tuple[str, ...]] = ()  # the results-store folders (experiment names) its rows come from
    # Sweep parameters that also select rows when rendering (column -> parameter).
    FILTERS: ClassVar[dict[str, str]] = {"model": "models", "dataset": "datasets", "system": "systems",
                                         "quantizer": "quantizers"}

    @property
    def name(self) -> str:
        return self.NAME

    @staticmethod
    @abstractmethod
    def render(rows: pd.DataFrame, paper: pd.DataFrame | None, figures_dir: Path):
        """Figures (results/figures/<NAME>.png and .pdf) and a Section with our numbers beside the paper's
        (`paper`: results/paper/<NAME>.csv, None when absent) and a verdict."""


class SweepArtifact(Artifact):
    """Measured by Hydra sweeps of the runner."""

    @staticmethod
    @abstractmethod
    def sweep(**params) -> list[list[str]]:
        """The override lists that measure it; keyword parameters (models, datasets, systems, bits, ...) narrow or
        widen it, so a miniature run is the same code path."""


class BenchmarkArtifact(Artifact):
    """Measured by a benchmark that writes its own rows (the packing benchmark of Figures 13 and 4)."""

    @staticmethod
    @abstractmethod
    def measure(store, **params) -> None:
        """Run the benchmark into the store (skipping it when already measured)."""

    @staticmethod
    @abstractmethod
    def load_rows(store) -> pd.DataFrame:
        """What the benchmark wrote."""


def paper_order(name: str) -> tuple:
    """Figures by number, then tables by number, then the rest by name."""
    m = re.fullmatch(r"(fig|table)(\d+)", name)
    return (("fig", "table").index(m.group(1)), int(m.group(2)), "") if m else (2, 0, name)


ARTIFACTS = Registry("artifact", package="experiments")  # NAME -> the artifact (one instance each)


def register_artifact(cls: type[Artifact]) -> type[Artifact]:
    ARTIFACTS.register(cls())
    return cls
