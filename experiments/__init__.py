"""One module per paper artifact, and the registry that names them.

Each module declares:
  NAME, TITLE          the artifact's id (`make reproduce-<NAME>`) and heading
  EXPERIMENTS          the results-store folders (experiment names) its rows come from
  sweep(**params)      the Hydra override lists that measure it; keyword parameters (models, datasets, systems,
                       bits, quantizers, ...) narrow or widen it, so a miniature run is the same code path
  render(rows, paper, figures_dir) -> Section
                       figures (results/figures/<NAME>.png and .pdf) and a Markdown section with our numbers beside
                       the paper's (results/paper/<NAME>.csv, passed as `paper`, None when absent) and a verdict
An artifact whose measurement is not a Hydra sweep (the packing benchmark of fig13/fig4) defines instead
  measure(store)       runs its benchmark into the store (skipping it when already measured), and
  load_rows(store)     reads what that benchmark wrote.
"""
from __future__ import annotations

from types import ModuleType

from experiments import (compare_quantizers, fig1, fig2, fig4, fig10, fig12, fig13, fig15, fig16, table3, table4,
                         table5)

ARTIFACTS: dict[str, ModuleType] = {m.NAME: m for m in (fig1, fig2, fig10, table3, table4, table5, fig12, fig13, fig4,
                                                        fig15, fig16, compare_quantizers)}


def get(name: str) -> ModuleType:
    if name not in ARTIFACTS:
        raise KeyError(f"unknown artifact {name!r}; known: {', '.join(ARTIFACTS)}")
    return ARTIFACTS[name]
