"""What an artifact hands the report: its Section (verdict, Markdown body, figures, claims), and the Markdown and
figure output every artifact shares."""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from experiments.paper_values import load_paper, paper_row_text, paper_value_text
from experiments.rules import Claim, NOT_RUN
from experiments.stats import finite


class NotAvailable(RuntimeError):
    """What an artifact needs to measure is not in this checkout or on this machine (the reason is the message)."""


@dataclass
class Section:
    """One artifact's part of the report."""

    name: str
    title: str
    verdict: str                       # reproduced | partly reproduced | differs | not run
    summary: str                       # one line: why this verdict
    body: str = ""                     # Markdown: our numbers beside the paper's
    figures: list[Path] = field(default_factory=list)
    context: str = ""                  # where ours were measured: device, flash emulation, proxy datasets
    claims: list[Claim] = field(default_factory=list)  # the paper's claims this artifact compares (the scoreboard)


def not_run_section(name: str, title: str, reason: str, claims: bool = True) -> Section:
    """An artifact with nothing measured: each row of the paper's values (`claims`: unless they are inputs, not
    claims, as Table 3's prompt lengths; a row whose notes say the value is ours is no claim) is a claim that did not
    run."""
    paper = load_paper(name) if claims else None
    rows = [] if paper is None else [r for r in paper.to_dict("records")
                                     if not str(r.get("notes", "")).startswith("ours")]
    unrun = [Claim(name, paper_row_text(r), paper_value_text(r), "–", NOT_RUN, [reason]) for r in rows]
    return Section(name, title, NOT_RUN, reason, f"Not run yet: `make reproduce-{name}`.\n", claims=unrun)


def caps_note(caps_seen: dict[str, list[str]]) -> str:
    """Markdown: why verdicts were capped, per condition ({where: reasons}); '' when none was."""
    if not caps_seen:
        return ""
    listed = "".join(f"- {where}: {'; '.join(reasons)}\n" for where, reasons in caps_seen.items())
    return f"Agreement can only be *qualitative* (the cap) here because:\n\n{listed}"


def simulation_inputs() -> str:
    """Markdown: the phone-like simulation's inputs with their sources (harness/pipeline_sim.py SIM_INPUTS), shown
    beside every verdict the simulation feeds: a simulated number repeats what went into it."""
    from harness.pipeline_sim import SIM_INPUTS

    table = pd.DataFrame([{"input": i.what, "value": f"{i.value:g}×", "source": i.source} for i in SIM_INPUTS])
    return ("**Inputs of the simulated series** (the simulator replays this host's measured operator costs with the "
            "accelerator's at these ratios; its verdicts are at best *qualitative*):\n\n" + md_table(table))


def interval_text(value: float, lo: float, hi: float, digits: int = 3, unit: str = "") -> str:
    """'1.23 [1.10–1.40]' (or just the value when the interval is unknown)."""
    if not finite(value):
        return "–"
    if finite(lo) and finite(hi):
        return f"{fmt(value, digits)}{unit} [{fmt(lo, digits)}–{fmt(hi, digits)}]"
    return f"{fmt(value, digits)}{unit} (no interval)"


def fmt(x, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    return f"{x:.0f}" if 10 ** digits <= abs(x) < 1e7 else f"{x:.{digits}g}"


def md_table(df: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown table (cells already formatted as text where it matters; columns named with a
    leading "_", such as "_caps", are data for the caller, not shown). Not pandas' to_markdown: tabulate pads every
    cell to its column's widest, which made REPORT.md 50% larger (121 KB -> 182 KB) for the same rendered page."""
    if df.empty:
        return "_(no rows)_\n"
    shown = df[[c for c in df.columns if not str(c).startswith("_")]]
    lines = ["| " + " | ".join(map(str, shown.columns)) + " |", "|" + "|".join("---" for _ in shown.columns) + "|"]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in shown.itertuples(index=False)]
    return "\n".join(lines) + "\n"


def _cell(v) -> str:
    """A cell as Markdown text: blank for a missing value, a float in its shortest form, '|' kept out of the table."""
    if v is None or (not isinstance(v, str) and pd.isna(v)):
        return ""
    return f"{v:g}" if isinstance(v, float) else str(v).replace("|", "/")


def save_figure(fig, name: str, figures_dir: Path) -> list[Path]:
    """results/figures/<name>.png and .pdf; returns both paths (PNG first)."""
    import matplotlib.pyplot as plt

    figures_dir.mkdir(parents=True, exist_ok=True)
    paths = [figures_dir / f"{name}.png", figures_dir / f"{name}.pdf"]
    for p in paths:
        tmp = p.with_name(f".tmp-{os.getpid()}-{p.name}")
        fig.savefig(tmp, dpi=130, bbox_inches="tight", format=p.suffix[1:])
        os.replace(tmp, p)
    plt.close(fig)
    return paths
