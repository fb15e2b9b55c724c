"""What every artifact module shares: the paper's reference values, the verdict rules, aggregation over repetitions,
the labels that must follow a number (emulated flash, proxy datasets), and figure/Markdown output.

A verdict compares our number with the paper's under one stated rule (`VERDICT_RULES`, printed in the report):
ratios within +-RATIO_TOLERANCE of the paper's are "reproduced"; on the same side of 1 but outside it,
"same direction"; otherwise "differs". Accuracy differences use ACCURACY_TOLERANCE_PP percentage points.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
PAPER_DIR = REPO / "results" / "paper"

RATIO_TOLERANCE = 0.25       # |ours / paper - 1| within this: reproduced
ACCURACY_TOLERANCE_PP = 5.0  # accuracy (or accuracy gain) within this many percentage points: reproduced
BAND_TOLERANCE = 0.15        # a prompt-length band within the paper's widened by this fraction: reproduced

REPRODUCED, SAME_DIRECTION, DIFFERS, NOT_RUN = "reproduced", "same direction", "differs", "not run"

VERDICT_RULES = f"""\
- **Ratios** (speedups, baseline TTFT / EdgeFlow TTFT): *reproduced* when ours is within ±{RATIO_TOLERANCE:.0%} of the
  paper's; *same direction* when both are on the same side of 1 (the same system wins) but farther apart; otherwise
  *differs*.
- **Accuracy differences** (drops and gains, in percentage points): *reproduced* within ±{ACCURACY_TOLERANCE_PP:g}
  points of the paper's; *same direction* when the sign agrees; otherwise *differs*.
- **Orderings** (perplexity tables): *reproduced* when the methods rank in the paper's order at that bit-width;
  *same direction* when the paper's best method is also ours; otherwise *differs*.
- **Prompt-length bands** (Table 3): *reproduced* when our band lies inside the paper's widened by ±{BAND_TOLERANCE:.0%}
  (tokenisers differ between models); otherwise *differs*.
- An artifact is *reproduced* when every comparison is; *partly reproduced* when some are; *differs* when none is;
  *not run* when there is nothing of ours to compare (the reason is given).
- Our numbers come from whatever model and device the rows name. When the model is not the paper's, or flash was not
  emulated on a host that is not flash-bound, the comparison is qualitative and the section says so."""


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


def not_run_section(name: str, title: str, reason: str) -> Section:
    return Section(name, title, NOT_RUN, reason, f"Not run yet: `make reproduce-{name}`.\n")


# --- paper reference values -------------------------------------------------------------------------------------------

def load_paper(name: str, paper_dir: Path | None = None) -> pd.DataFrame | None:
    """results/paper/<name>.csv ('#' lines are its source notes); None when the file is absent."""
    path = (paper_dir or PAPER_DIR) / f"{name}.csv"
    if not path.exists():
        return None
    df = pd.read_csv(path, comment="#", skip_blank_lines=True, dtype={"model": "string", "dataset": "string"})
    if df.empty:
        raise ValueError(f"{path}: no rows")
    return df


def paper_source(name: str, paper_dir: Path | None = None) -> str:
    """The comment header of results/paper/<name>.csv, joined into one paragraph."""
    path = (paper_dir or PAPER_DIR) / f"{name}.csv"
    if not path.exists():
        return f"(results/paper/{name}.csv is missing)"
    lines = [ln[1:].strip() for ln in path.read_text().splitlines() if ln.startswith("#")]
    return " ".join(lines)


def parse_paper_value(value) -> tuple[float, bool]:
    """A paper cell as (number, is_lower_bound): '>10k' -> (10000.0, True); 30.96 -> (30.96, False)."""
    if isinstance(value, (int, float)):
        return float(value), False
    text = str(value).strip().lower().replace(",", "")
    lower = text.startswith(">")
    text = text.lstrip("> ")
    scale = 1000.0 if text.endswith("k") else 1.0
    return float(text.rstrip("k")) * scale, lower


# --- our rows -----------------------------------------------------------------------------------------------------------

def read_rows(store, experiments: tuple[str, ...]) -> pd.DataFrame:
    """All rows of the named store folders (experiment names), in one frame."""
    frames = [store.read(e) for e in experiments]
    frames = [f for f in frames if not f.empty]
    if not frames:
        return store.read(experiments[0]) if experiments else pd.DataFrame()
    return pd.concat(frames, ignore_index=True)


def ok_rows(df: pd.DataFrame, metric: str) -> pd.DataFrame:
    return df[(df["status"] == "ok") & (df["metric"] == metric) & df["value"].notna()]


def summarize(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Median over repetitions with the spread (min, max) and count, per key."""
    if df.empty:
        return pd.DataFrame(columns=[*keys, "median", "min", "max", "n"])
    g = df.groupby(keys, dropna=False)["value"]
    return g.agg(median="median", min="min", max="max", n="count").reset_index()


def unrun_reasons(df: pd.DataFrame) -> pd.DataFrame:
    """Rows saying a configuration did not run or failed, with a one-line reason."""
    bad = df[df["status"].isin(["not run", "failed"])].copy()
    bad["reason"] = [
        f"{status}: {(err or '').strip().splitlines()[0] if (err or '').strip() else 'no reason recorded'}"
        for status, err in zip(bad["status"], bad["error"].fillna(""))
    ]
    return bad


def labels(df: pd.DataFrame) -> list[str]:
    """The labels a reader must see beside these numbers: emulated flash, proxy datasets, devices."""
    if df.empty or not {"device", "flash_emulated_mbps", "label", "metric"} <= set(df.columns):
        hosts = sorted(df["host"].dropna().unique()) if "host" in df.columns else []
        return ["host " + ", ".join(hosts)] if hosts else []
    out = []
    devices = sorted(d for d in df["device"].dropna().unique())
    if devices:
        out.append("device: " + ", ".join(devices))
    rates = sorted(df["flash_emulated_mbps"].dropna().unique())
    if rates:
        out.append("flash emulated at " + ", ".join(f"{r:g}" for r in rates) + " MB/s")
    elif "emulated" in set(df["label"]):
        out.append("flash emulated")
    elif (df["metric"] == "ttft_s").any():
        out.append("flash not emulated (host storage)")
    busy = df[(df["metric"] == "host_busy") & (df["value"] > 0)]
    if len(busy):
        loads = df.loc[df["metric"] == "load_avg_1m", "value"]
        peak = f", 1-min load average up to {loads.max():.1f}" if len(loads) else ""
        out.append(f"host busy during {len(busy)} timed runs{peak}: timings noisy")
    if "proxy" in set(df["label"]):
        proxies = sorted(set(df.loc[df["label"] == "proxy", "dataset"].dropna()))
        out.append("proxy datasets (local stand-ins): " + ", ".join(proxies))
    return out


def models_differ_note(ours: set[str], paper_models: set[str]) -> str:
    """A sentence when our rows' models are not the paper's (then only the qualitative comparison holds)."""
    foreign = sorted(ours - paper_models)
    if not foreign:
        return ""
    return (f"Our rows use {', '.join(foreign)}, not the paper's {', '.join(sorted(paper_models))}: "
            "compare the direction, not the magnitude.")


# --- verdicts -----------------------------------------------------------------------------------------------------------

def ratio_verdict(ours: float, paper: float, tol: float = RATIO_TOLERANCE) -> str:
    if ours is None or not math.isfinite(ours):
        return NOT_RUN
    if abs(ours / paper - 1) <= tol:
        return REPRODUCED
    return SAME_DIRECTION if (ours - 1) * (paper - 1) > 0 else DIFFERS


def points_verdict(ours_pp: float, paper_pp: float, tol: float = ACCURACY_TOLERANCE_PP) -> str:
    if ours_pp is None or not math.isfinite(ours_pp):
        return NOT_RUN
    if abs(ours_pp - paper_pp) <= tol:
        return REPRODUCED
    return SAME_DIRECTION if ours_pp * paper_pp > 0 else DIFFERS


def overall(verdicts: list[str]) -> tuple[str, str]:
    """(artifact verdict, one-line count) from the per-comparison verdicts."""
    done = [v for v in verdicts if v != NOT_RUN]
    if not done:
        return NOT_RUN, "no comparison possible"
    n_rep, n_dir, n_not = done.count(REPRODUCED), done.count(SAME_DIRECTION), len(verdicts) - len(done)
    count = f"{n_rep} of {len(verdicts)} comparisons reproduced, {n_dir} same direction, {n_not} not run"
    if n_rep == len(verdicts):
        return REPRODUCED, count
    return ("partly reproduced" if n_rep or n_dir else DIFFERS), count


# --- output -------------------------------------------------------------------------------------------------------------

def fmt(x, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    return f"{x:.0f}" if 10 ** digits <= abs(x) < 1e7 else f"{x:.{digits}g}"


def md_table(df: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown table (cells already formatted as text where it matters)."""
    if df.empty:
        return "_(no rows)_\n"
    cols = [str(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(_cell(v) for v in row) + " |")
    return "\n".join(lines) + "\n"


def _cell(v) -> str:
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
