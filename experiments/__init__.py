"""One module per paper artifact (experiments/base.py: the contract, and the registry that names them).

Importing the package imports every artifact module (so each registers itself; ARTIFACTS lists figures then tables
in the paper's order); the other modules here are the machinery: base, what every artifact shares (paper_values: the paper's numbers;
selection: which rows count and their labels; lineup: which systems the figures draw; stats: intervals; rules: verdicts; output: sections, tables, figures),
run (measure and draw one artifact), report (REPORT.md / .html), multirun (Hydra launchers) and __main__ (the CLI).
"""
from __future__ import annotations

import importlib
import pkgutil

from experiments.base import ARTIFACTS, Artifact, paper_order

MACHINERY = {"__main__", "base", "paper_values", "selection", "lineup", "stats", "rules", "output", "run", "report", "report_browser",
             "multirun"}

for _module in (m.name for m in pkgutil.iter_modules(__path__) if m.name not in MACHINERY):
    importlib.import_module(f"experiments.{_module}")
_registered = sorted(ARTIFACTS.items(), key=lambda item: paper_order(item[0]))  # modules import each other
ARTIFACTS.clear()
ARTIFACTS.update(_registered)


def get(name: str) -> Artifact:
    return ARTIFACTS.lookup(name)
