"""Table 5 (Appendix C): WikiText-2 perplexity of Phi3-3.8B; the same measurement and rendering as Table 4."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from experiments import table4
from experiments.base import SweepArtifact, register_artifact
from experiments.output import Section

NAME = "table5"
TITLE = "Table 5 - WikiText-2 perplexity, Phi3-3.8B"
MODEL = "phi3-3.8b"
EXPERIMENTS = table4.EXPERIMENTS
sweep = table4.sweep


def render(rows: pd.DataFrame, paper: pd.DataFrame | None, figures_dir: Path) -> Section:
    return table4.render_for(NAME, TITLE, MODEL, rows, paper, figures_dir)


@register_artifact
class Table5(SweepArtifact):
    NAME, TITLE, EXPERIMENTS = NAME, TITLE, EXPERIMENTS
    sweep, render = staticmethod(sweep), staticmethod(render)
