"""What every artifact module shares: the paper's reference values, the verdict rules and the statistics behind them,
which rows count (the latest successful attempt of each configuration) and under which conditions they were measured,
aggregation over repetitions, the labels that must follow a number, and figure/Markdown output.

A verdict compares our number, with its 95% interval, with the paper's under one stated rule (`VERDICT_RULES`,
printed once in the report, each clause tested in tests/experiments/test_verdicts.py).
"""
from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from harness.data.prompts import CORPUS_PROMPT_LABEL
from harness.quant.outputs import NPU_NUMERICS
from harness.runner.store import QUALITY_METRICS, RUNTIME_EVALUATED
from harness.systems.base import CPU_THREADS

REPO = Path(__file__).resolve().parents[1]
PAPER_DIR = REPO / "results" / "paper"

# Tolerances widen our 95% interval before asking whether the paper's value is inside it: they allow for what the
# interval does not hold (the paper's own noise, a different build of the same system), not for our sampling noise.
RATIO_TOLERANCE = 0.10       # our ratio interval widened by x(1+tol) up and /(1+tol) down
ACCURACY_TOLERANCE_PP = 2.0  # our accuracy-difference interval widened by this many percentage points each side
SHARE_TOLERANCE_PP = 5.0     # a share or rate (a fraction of a whole): our interval widened by this many points
# An interval this wide proves nothing about the size of an effect: the verdict is inconclusive whatever it holds.
MAX_RATIO_SPREAD = 2.0       # a ratio's interval whose upper end is more than this many times its lower end
MAX_POINTS_WIDTH_PP = 20.0   # a difference's or a share's interval wider than this many percentage points
BAND_TOLERANCE = 0.15        # Table 3 check of the prompts' lengths against the paper's band (an input, not a verdict)
MIN_DATASETS = 3             # a ratio verdict needs this many datasets (or all the paper's statement covers) ...
MIN_PROMPTS = 3              # ... and this many distinct prompts per dataset and system
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_MIN_PROMPTS = 8    # fewer common prompts per dataset: a t-interval of per-prompt log ratios instead
BOOTSTRAP_SEED = 0
Z95 = 1.959963984540054

REPRODUCED, SAME_DIRECTION, DIFFERS, NOT_RUN = "reproduced", "same direction", "differs", "not run"
QUALITATIVE, INCONCLUSIVE, PARTLY = "qualitative", "inconclusive", "partly reproduced"
VERDICTS = (REPRODUCED, QUALITATIVE, SAME_DIRECTION, DIFFERS, INCONCLUSIVE, NOT_RUN)  # a comparison's, counted so
INPUT = "input"  # a section showing what went into the measurement (Table 3), not a result: no verdict
NO_CLAIM = "no paper claim"  # a section of ours beside no claim of the paper (compare-quantizers): no verdict
# The paper's testbed (section 5.1): Xiaomi 15 Pro, Snapdragon 8 Elite (SoC model SM8750). A row's device is the
# paper's when its device_info names that SoC on a real phone (not the loopback sandbox) without flash emulation.
PAPER_SOCS = ("SM8750",)

VERDICT_RULES = f"""\
Each comparison of ours with the paper's gets one verdict. Our value carries a 95% interval: accuracy from the
binomial (Wilson) interval of each accuracy row's items, a difference of accuracies from the Wilson intervals combined
(MOVER, Newcombe's method for two proportions); a TTFT ratio on the prompts both systems timed (paired: a prompt
only one of them timed is left out), per dataset, then the geometric mean over datasets, its interval from a seeded
bootstrap ({BOOTSTRAP_RESAMPLES} resamples) over prompts and the repetitions of each prompt when every dataset has at
least {BOOTSTRAP_MIN_PROMPTS} common prompts, else from the t-interval of the mean per-prompt log ratio (Welch-
Satterthwaite degrees of freedom over datasets; the table says which). The interval is widened by a tolerance for
what it does not hold: ratios by ×/÷{1 + RATIO_TOLERANCE:g}, accuracy differences by ±{ACCURACY_TOLERANCE_PP:g} percentage points, shares and rates
(fractions of a whole: a bubble rate, the share of a cold start spent loading) by ±{SHARE_TOLERANCE_PP:g} percentage
points. A share is judged on that additive scale, never as a ratio, and has no direction to agree on: *reproduced*
when the paper's value lies within our widened interval, else *differs*.

- *Direction*: a ratio's is which side of 1 it lies on (which system wins), a difference's its sign. Ours is
  established when the whole 95% interval lies on one side. A paper value within the tolerance of 1 (or of 0)
  states no winner (no difference): then it is *reproduced* only when our whole 95% interval lies within that
  tolerance of no effect, *differs* when the whole interval lies beyond it, and is *inconclusive* otherwise (an
  interval too wide to rule a difference in or out proves no claim of "no difference").
- *reproduced*: our direction is established and is the paper's, and the paper's value lies inside our widened
  interval.
- *same direction*: our direction is established and is the paper's, but the paper's value lies outside our widened
  interval.
- *differs*: our direction is established and is the opposite of the paper's, or the paper's value lies outside our
  widened interval while our direction is not established (we see a different size of effect).
- *inconclusive*: our interval includes no effect (1, or 0) and the paper's value: the data cannot tell. An
  interval too wide to size an effect is inconclusive whatever it holds: a ratio's whose upper end is more than
  {MAX_RATIO_SPREAD:g}× its lower one, a difference's or share's wider than {MAX_POINTS_WIDTH_PP:g} percentage points.
  A ratio also needs at least {MIN_DATASETS} datasets (or every dataset the paper's statement covers, when fewer) and
  {MIN_PROMPTS} prompts per dataset; with fewer it is inconclusive.
- *qualitative*: the cap. When the model is not the paper's, the device is not the paper's phone (a host, flash
  emulation, the loopback sandbox), the dataset is a local proxy, or our number has no interval (a single
  measurement), only the direction can be compared: *reproduced* and *same direction* become *qualitative*;
  *differs* and *inconclusive* stay. EdgeFlow's own conditions cap it too: a timing whose accelerator half ran on CPU
  threads (every EdgeFlow timing of this project so far: no NPU ran it) or a simulated one, and a quality number
  (accuracy, perplexity, KL) that numerics other than the NPU's computed (float outputs, dynamic or float
  activations, or rows that do not record theirs). The table says which condition capped it.
- *Percent or points*: the paper gives accuracy differences in "%", which may mean percentage points or percent of
  the accuracy they are relative to. Ours (in points) is judged against both readings (the second with our
  reference accuracy); when the two verdicts disagree, the unit decides and the comparison is *inconclusive*.
- *Orderings* (perplexity tables; perplexity is deterministic, no interval): *reproduced* when the methods rank in the
  paper's order at that bit-width; *same direction* when the paper's best method is also ours; otherwise *differs*;
  the same cap applies.
- *Counts where fewer is better* (instructions per weight, deterministic): *reproduced* when ours is at most the
  paper's ×{1 + RATIO_TOLERANCE:g}, otherwise *differs*; the same cap applies.
- *Table 3* (prompt lengths) is an input: the prompts are drawn from the paper's bands by construction, so it is shown
  (with a check that each band holds, ±{BAND_TOLERANCE:.0%}) and gets no verdict.
- An artifact is *not run* when none of its comparisons could be made; *reproduced* when every comparison is
  reproduced; *partly reproduced* when at least one is but not all (a not-run or inconclusive comparison counts as
  not reproduced); otherwise, with none reproduced: *differs* when any comparison differs, else *qualitative* when any
  is qualitative, else *same direction* when any is, else *inconclusive*.
- Rows that count: per configuration (config hash) only its latest successful attempt (rows of failed attempts and
  of superseded reruns, e.g. older code, are dropped; a configuration that never succeeded shows its latest reason).
  Rows measured under different conditions (model, device, flash emulation, dataset source builtin/proxy) are never
  pooled: each section draws them apart. Different configurations may come from different commits; each section
  lists the commits its rows come from."""


class NotAvailable(RuntimeError):
    """What an artifact needs to measure is not in this checkout or on this machine (the reason is the message)."""


# What would make a capped or weak verdict stronger, by the cap's reason (cap_reasons, npu_caps) or the verdict.
STRONGER = (("is not the paper's phone", "the paper's phone (Snapdragon 8 Elite)"),
            ("is not the paper's", "the paper's model (from the Hugging Face hub)"),
            ("proxy dataset", "the paper's datasets (from the Hugging Face hub)"),
            ("stand-in", "the engines' own numbers, not fake-quant stand-ins"),
            ("on CPU threads", "EdgeFlow's accelerator half on an NPU"),
            ("simulated at assumed", "EdgeFlow's accelerator half on an NPU"),
            ("NPU's numerics", "EdgeFlow's numbers computed with the NPU's numerics"),
            ("no interval", "repetitions, for an interval"))


@dataclass
class Claim:
    """One quantitative claim of the paper beside ours: a row of the report's scoreboard."""

    artifact: str
    statement: str
    paper: str
    ours: str
    verdict: str
    caps: list[str] = field(default_factory=list)  # why the verdict is capped (cap_reasons), or why it did not run
    headline: bool = False  # one of the abstract's and section 5's headline numbers (listed first)

    def stronger(self) -> str:
        """What would have to change for a stronger verdict ('' when it is already reproduced)."""
        if self.verdict == REPRODUCED:
            return ""
        if self.verdict == NOT_RUN:
            why = "; ".join(c.removeprefix("not run: ") for c in self.caps)
            return f"a run (`make reproduce-{self.artifact}`)" + (f": {why}" if why else "")
        needs = list(dict.fromkeys(need for cap_ in self.caps for key, need in STRONGER if key in cap_))
        if self.verdict == INCONCLUSIVE:
            needs.append("more prompts, items or windows (a narrower interval)")
        if self.verdict in (DIFFERS, SAME_DIRECTION) and not needs:
            needs.append("nothing: measured under the paper's conditions, ours differs")
        return "; ".join(needs) or "; ".join(self.caps)


def claims(artifact: str, lines: list[dict], statement, paper: str = "paper", ours: str = "ours",
           caps=(), headline=lambda line: False) -> list[Claim]:
    """The scoreboard rows of an artifact's comparison `lines` (the dicts its table is made of): `statement` a
    function of a line, `paper` / `ours` the keys of its values, `caps` the reasons capping every line (a line's own
    are its "_caps" key, which md_table does not show)."""
    return [Claim(artifact, statement(line), str(line.get(paper, "–")), str(line.get(ours, "–")), line["verdict"],
                  list(line.get("_caps", caps)), bool(headline(line))) for line in lines]


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


def paper_row_text(row: dict) -> str:
    """A row of results/paper/<name>.csv as a statement: 'ttft_ratio · llamacpp · 5 bits'."""
    def text(key: str) -> str:
        return f"vs {row[key]}" if key == "versus" else str(row[key])

    parts = [text(k) for k in ("metric", "approach", "part", "system", "config", "variant", "packing", "quantizer",
                               "policy", "versus", "model", "dataset") if isinstance(row.get(k), str) and row[k]]
    if "bits" in row and isinstance(row["bits"], (int, float)) and math.isfinite(row["bits"]):
        parts.append(f"{row['bits']:g} bits")
    return " · ".join(parts)


def paper_value_text(row: dict) -> str:
    """A row's value with its unit: '4.07 x'."""
    value, unit = row.get("value", "–"), row.get("unit", "")
    text = f"{value:g}" if isinstance(value, float) else str(value)
    return text + (f" {unit}" if isinstance(unit, str) and unit else "")


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


# --- our rows: which count, and under which conditions -------------------------------------------------------------------

def read_rows(store, experiments: tuple[str, ...]) -> pd.DataFrame:
    """All rows of the named store folders (experiment names), in one frame, with the `part` (attempt) of each."""
    frames = [store.read(e, with_part=True) for e in experiments]
    frames = [f for f in frames if not f.empty]
    if not frames:
        return store.read(experiments[0], with_part=True) if experiments else pd.DataFrame()
    return pd.concat(frames, ignore_index=True)


def current(df: pd.DataFrame) -> pd.DataFrame:
    """The rows that count: per configuration (experiment, config_hash), only its latest successful attempt. An
    attempt is one part file (`part` column, from read_rows) or, without it, one run of consecutive rows of the
    configuration; it succeeded when none of its rows failed. A configuration with no successful attempt keeps only the
    failed / not-run rows of its latest attempt (the reason), never the partial measurements before a failure. Rows
    without a config hash are kept as they are. Idempotent: every renderer calls it."""
    if df.empty or "config_hash" not in df.columns or "status" not in df.columns:
        return df
    original, df = df, df.reset_index(drop=True)
    has_key = df["config_hash"].notna()
    exp = df["experiment"].fillna("").astype(str) if "experiment" in df.columns else pd.Series("", index=df.index)
    key = exp + "\x00" + df["config_hash"].fillna("").astype(str)
    if "part" in df.columns and df["part"].notna().all():
        attempt = key + "\x00" + df["part"].astype(str)
    else:
        attempt = key + "\x00" + (key != key.shift()).cumsum().astype(str)
    failed = (df["status"] == "failed").groupby(attempt).any()  # attempt -> any row failed (not run is no failure)
    chosen: dict[str, tuple[str, bool]] = {}  # key -> (attempt, succeeded); rows are in append order
    for k, a in dict.fromkeys(zip(key[has_key], attempt[has_key])):
        ok = not failed[a]
        if ok or k not in chosen or not chosen[k][1]:
            chosen[k] = (a, ok)
    picked = pd.Series([chosen.get(k, ("", False))[0] == a for k, a in zip(key, attempt)], index=df.index)
    succeeded = pd.Series([chosen.get(k, ("", False))[1] for k in key], index=df.index)
    keep = ~has_key | (picked & (succeeded | (df["status"] != "ok")))
    return original[keep.to_numpy()]


def system_label(system: str, short: bool = False) -> str:
    """A system's name in tables and figures (`short`: in dense figure labels), as its class defines it
    (harness/systems/<name>.py: display, short); an unknown name stands for itself."""
    from harness.systems import SYSTEMS

    cls = SYSTEMS.get(system)
    if cls is None:
        return system
    return (short and cls.short) or cls.display or system


def system_labels(short: bool = False) -> dict[str, str]:
    """Every registered system's label: {name: label}."""
    from harness.systems import SYSTEMS

    return {name: system_label(name, short) for name in SYSTEMS}


def system_color(system: str, default: str = "#bcbd22") -> str:
    from harness.systems import SYSTEMS

    cls = SYSTEMS.get(system)
    return (cls.color if cls is not None else "") or default


def quantizer_accepts(name: str, bits: float) -> bool:
    """Whether the registered quantizer `name` takes budget_bits=bits (e.g. AIMET: int4 / int8 weights only)."""
    from harness.quant import REGISTRY

    budgets = REGISTRY.get(name).budgets if name in REGISTRY else None
    return budgets is None or float(bits) in budgets


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


# Conditions under which a number was measured; rows differing in any of them are never pooled.
CONDITIONS = ("model", "device", "flash", "source")


def dataset_source(df: pd.DataFrame) -> pd.Series:
    """'proxy' for rows on a local stand-in (label proxy; accuracy and perplexity on local tasks whatever computed
    them, which their data_source names; TTFT prompts cut from the local corpus, which their prompt_source names), else
    'builtin' (the paper's dataset)."""
    def column(name: str) -> pd.Series:
        return df[name].fillna("") if name in df.columns else pd.Series("", index=df.index)

    proxy = ((column("label") == "proxy") | (column("data_source") == "proxy")
             | (column("prompt_source") == CORPUS_PROMPT_LABEL))
    return pd.Series(np.where(proxy, "proxy", "builtin"), index=df.index)


def flash_setting(df: pd.DataFrame) -> pd.Series:
    """'flash <r> MB/s (emulated)' or 'device storage' per row."""
    if "flash_emulated_mbps" not in df.columns:
        return pd.Series("device storage", index=df.index)
    return pd.Series([f"flash {r:g} MB/s (emulated)" if pd.notna(r) else "device storage"
                      for r in df["flash_emulated_mbps"]], index=df.index, dtype=object)


def with_conditions(df: pd.DataFrame) -> pd.DataFrame:
    """`df` with the condition columns: device (filled), flash and source (strings, so they group and pivot)."""
    device = df["device"].fillna("?") if "device" in df.columns else pd.Series("?", index=df.index)
    return df.assign(device=device, flash=flash_setting(df), source=dataset_source(df))


def condition_text(**cond) -> str:
    """'smollm2-135m · local · flash 200 MB/s (emulated) · proxy data' from condition values (those given)."""
    parts = [str(cond[k]) for k in ("model", "device", "flash") if cond.get(k) is not None]
    if cond.get("source") is not None:
        parts.append("proxy data" if cond["source"] == "proxy" else "builtin data")
    return " · ".join(parts)


def spans_note(df: pd.DataFrame, keys: tuple[str, ...] = CONDITIONS) -> str:
    """A sentence when the rows span several conditions (they are then drawn apart), else ''."""
    df = with_conditions(df)
    keys = [k for k in keys if k in df.columns]
    if df.empty or not keys:
        return ""
    combos = df[keys].drop_duplicates()
    if len(combos) < 2:
        return ""
    listed = "; ".join(condition_text(**dict(zip(keys, r))) for r in combos.itertuples(index=False))
    return (f"These rows span {len(combos)} measurement conditions ({listed}): each is drawn and compared on its "
            "own, never pooled.")


SENSOR_METRICS = ("energy_j", "avg_power_w")


def sensor_source(df: pd.DataFrame) -> pd.Series:
    """Per row, the label of its run's power rows ('measured': a host's RAPL counter or a phone's battery;
    'stand-in': the loopback phone's scripted files), '' for a run without any: power from different sensors is
    never one series. A run is a configuration's repetition."""
    if df.empty or "metric" not in df.columns:
        return pd.Series("", index=df.index, dtype=object)
    run = list(zip(df["config_hash"], df["repetition"]))
    power = df["metric"].isin(SENSOR_METRICS)
    labels = dict(zip([r for r, p in zip(run, power) if p], df.loc[power, "label"].fillna("")))
    return pd.Series([labels.get(r, "") for r in run], index=df.index, dtype=object)


def scoring_path(df: pd.DataFrame) -> pd.Series:
    """Per row, what computed a quality number: an engine's own forward pass (its system: 'edgeflow' is our runtime,
    also for a quantizer's rows with the variant RUNTIME_EVALUATED), QNN's HTP simulator (label simulated) or the
    fake-quant torch model."""
    none = pd.Series(None, index=df.index, dtype=object)
    system, label, variant = (df[c] if c in df.columns else none for c in ("system", "label", "variant"))
    return pd.Series([s if isinstance(s, str) and s else "edgeflow" if v == RUNTIME_EVALUATED
                      else "HTP simulator" if lab == "simulated" else "fake-quant model"
                      for s, lab, v in zip(system, label, variant)], index=df.index, dtype=object)


TIMED = ("device", "flash", "source")  # what a timing depends on beyond the model (CONDITIONS)


def one_condition(rows: pd.DataFrame, keys: tuple[str, ...] = TIMED,
                  preferred: pd.Series | None = None) -> tuple[pd.DataFrame, str]:
    """(rows, note): per model, only the rows of one measurement condition (their values in `keys`, columns of
    with_conditions(rows) or of rows): a condition of `preferred` rows (a boolean Series on rows' index) if any,
    then the one with the most rows, ties to the first in sorted order; the note names each condition left out ('' when
    none was). For figures that draw one value per model and series: they never pool two conditions. The returned
    rows carry the condition columns."""
    df = with_conditions(rows)
    if df.empty:
        return df, ""
    cond = pd.Series(list(df[list(keys)].fillna("").astype(str).itertuples(index=False, name=None)), index=df.index)
    first = (pd.Series(False, index=df.index) if preferred is None
             else preferred.reindex(rows.index).fillna(False).astype(bool).set_axis(df.index))
    keep = df["model"].isna()
    left = []
    for model in sorted(df["model"].dropna().unique()):
        mine = df["model"] == model
        counts = cond[mine].value_counts()
        chosen = set(cond[mine & first])
        best = sorted(counts.index, key=lambda c: (c not in chosen, -counts[c], c))[0]
        keep |= mine & cond.apply(lambda c: c == best)  # (a tuple compared as one value, not element-wise)
        for other in sorted(c for c in counts.index if c != best):
            values = dict(zip(keys, other))
            what = condition_text(model=model, **{k: values[k] for k in ("device", "flash", "source") if k in values})
            what += "".join(f" · {k} {values[k]}" for k in keys if k not in CONDITIONS and values[k])
            left.append(f"{what} ({counts[other]} rows)")
    note = ("Rows measured under another condition are left out of this figure, never pooled with it: "
            + "; ".join(left) + ".") if left else ""
    return df[keep], note


def commits(df: pd.DataFrame) -> str:
    """Which code the rows come from: 'code at commit abc' or 'code at 2 commits: abc (10 rows), def (4 rows)'."""
    if "git_commit" not in df.columns or df["git_commit"].dropna().empty:
        return ""
    counts = df["git_commit"].dropna().value_counts()
    if len(counts) == 1:
        return f"code at commit {counts.index[0]}"
    return f"code at {len(counts)} commits: " + ", ".join(f"{c} ({n} rows)" for c, n in counts.items())


def device_facts(df: pd.DataFrame) -> list[dict]:
    """Per row, what its device said of itself (the device_info JSON; {} when absent or unreadable)."""
    def one(info) -> dict:
        try:
            d = json.loads(info) if isinstance(info, str) else {}
        except ValueError:
            return {}
        return d if isinstance(d, dict) else {}

    return [one(i) for i in (df["device_info"] if "device_info" in df.columns else [None] * len(df))]


def on_paper_device(df: pd.DataFrame) -> pd.Series:
    """Per row: measured on the paper's phone (its SoC, PAPER_SOCS, in device_info; not the loopback sandbox; no
    flash emulation)."""
    rate = df["flash_emulated_mbps"] if "flash_emulated_mbps" in df.columns else pd.Series(None, index=df.index)
    return pd.Series([pd.isna(r) and not d.get("loopback") and str(d.get("soc", "")).upper() in PAPER_SOCS
                      for d, r in zip(device_facts(df), rate)], index=df.index, dtype=bool)


def is_edgeflow(df: pd.DataFrame) -> pd.Series:
    """Per row: a number of EdgeFlow's (its system, or its quantizer's artifact scored without a system)."""
    none = pd.Series(None, index=df.index, dtype=object)
    system, quantizer = (df[c] if c in df.columns else none for c in ("system", "quantizer"))
    return (system == "edgeflow") | (system.isna() & (quantizer == "edgeflow"))


NO_NPU = "EdgeFlow's accelerator half ran on CPU threads, not on an NPU"
SIMULATED_NPU = "EdgeFlow's accelerator half was simulated at assumed NPU speeds, not run on an NPU"


def npu_caps(df: pd.DataFrame, timing: bool) -> list[str]:
    """Why EdgeFlow's numbers among these rows are not those of the paper's system, which runs its INT8 matmuls on an
    NPU: for a timing, an accelerator half that ran on CPU threads (a row's `accelerator`; rows without one were timed
    by the runtime, whose lane is CPU threads on every device) or in a simulator; for a quality number, numerics that
    are not the NPU's (a row's `numerics`)."""
    ef = df[is_edgeflow(df)] if len(df) else df
    if ef.empty:
        return []
    if timing:
        simulated = ef["label"] == "simulated" if "label" in ef.columns else pd.Series(False, index=ef.index)
        ran = ef["accelerator"] if "accelerator" in ef.columns else pd.Series(None, index=ef.index, dtype=object)
        return ([SIMULATED_NPU] * bool(simulated.any())
                + [NO_NPU] * bool(((ran.fillna(CPU_THREADS) != "npu") & ~simulated).any()))
    metric = ef["metric"].fillna("")
    quality = ef[metric.isin(QUALITY_METRICS) | metric.str.startswith(("kl_fp16", "top1_agreement"))]
    numerics = quality["numerics"] if "numerics" in quality.columns else pd.Series(None, index=quality.index)
    other = sorted(set(numerics.fillna("not recorded")) - {NPU_NUMERICS})
    return [f"EdgeFlow's numbers were not computed with the NPU's numerics ({', '.join(other)})"] if other else []


def cap_reasons(df: pd.DataFrame, paper_models, device_matters: bool = True) -> list[str]:
    """Why a comparison of these rows with the paper's can only be qualitative (empty: it can be quantitative):
    a model that is not the paper's, a device that is not its phone (when the metric depends on the device: TTFT,
    not accuracy or perplexity), a proxy dataset, and EdgeFlow without its NPU (npu_caps: a timing when
    `device_matters`, else a quality number)."""
    out = npu_caps(df, timing=device_matters)
    paper_models = set(paper_models)
    if "model" in df.columns:
        foreign = sorted(set(df["model"].dropna()) - paper_models)
        if foreign:
            out.append(f"model {', '.join(foreign)} is not the paper's")
    if device_matters and len(df) and not on_paper_device(df).all():
        devices = sorted(set(with_conditions(df)["device"]))
        rates = sorted(df["flash_emulated_mbps"].dropna().unique()) if "flash_emulated_mbps" in df.columns else []
        emu = f", flash emulated at {', '.join(f'{r:g}' for r in rates)} MB/s" if rates else ""
        out.append(f"device {', '.join(devices)}{emu} is not the paper's phone")
    if len(df) and (dataset_source(df) == "proxy").any():
        out.append("proxy dataset")
    return out


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


def labels(df: pd.DataFrame) -> list[str]:
    """The labels a reader must see beside these numbers: emulated flash, proxy datasets, devices, code version."""
    if df.empty or not {"device", "flash_emulated_mbps", "label", "metric"} <= set(df.columns):
        hosts = sorted(df["host"].dropna().unique()) if "host" in df.columns else []
        return ["host " + ", ".join(hosts)] if hosts else []
    out = []
    devices = sorted(d for d in df["device"].dropna().unique())
    if devices:
        out.append("device: " + ", ".join(devices))
    rates = sorted(df["flash_emulated_mbps"].dropna().unique())
    timed = df[df["metric"] == "ttft_s"]
    if rates:
        some = " (other rows: device storage)" if timed["flash_emulated_mbps"].isna().any() else ""
        out.append("flash emulated at " + ", ".join(f"{r:g}" for r in rates) + " MB/s" + some)
    elif "emulated" in set(df["label"]):
        loopback = any(d.get("loopback") for d in device_facts(df))
        out.append("timings under emulation: the loopback phone (aarch64 under qemu on this host)" if loopback
                   else "flash emulated")
    elif (df["metric"] == "ttft_s").any():
        out.append("flash not emulated (host storage)")
    simulated = df[df["label"] == "simulated"]
    if len(simulated):
        pipeline = simulated["metric"].fillna("").str.startswith("sim_")
        which = ["the pipeline simulator over this host's operator costs"] * bool(pipeline.any())
        which += ["QNN's HTP simulator (the accelerator's numerics)"] * bool((~pipeline).any())
        out.append(f"simulated: {' and '.join(which)} (not measured on a device)")
    stand_in = df[df["label"] == "stand-in"]
    if len(stand_in):
        sensors = stand_in["metric"].isin(SENSOR_METRICS)
        which = ["the fake-quant torch model in place of an integer engine"] * bool((~sensors).any())
        which += ["the loopback phone's scripted sensors"] * bool(sensors.any())
        out.append(f"stand-in: {' and '.join(which)}")
    busy = df[(df["metric"] == "host_busy") & (df["value"] > 0)]
    if len(busy):
        loads = df.loc[df["metric"] == "load_avg_1m", "value"]
        peak = f", 1-min load average up to {loads.max():.1f}" if len(loads) else ""
        out.append(f"host busy during {len(busy)} timed runs{peak}: timings noisy")
    proxy = df[dataset_source(df) == "proxy"]
    if len(proxy):
        out.append("proxy datasets (local stand-ins): " + ", ".join(sorted(set(proxy["dataset"].dropna()))))
    code = commits(df)
    if code:
        out.append(code)
    return out


def models_differ_note(ours: set[str], paper_models: set[str]) -> str:
    """A sentence when our rows' models are not the paper's (then only the qualitative comparison holds)."""
    foreign = sorted(ours - paper_models)
    if not foreign:
        return ""
    return (f"Our rows use {', '.join(foreign)}, not the paper's {', '.join(sorted(paper_models))}: "
            "compare the direction, not the magnitude (verdicts capped at *qualitative*).")


# --- statistics -----------------------------------------------------------------------------------------------------------

def wilson(k: float, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a proportion k/n."""
    if n is None or n <= 0:
        return math.nan, math.nan
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def combination_interval(terms: list[tuple[float, float, int | None]],
                         correlations: dict[tuple[int, int], float] | None = None) -> tuple[float, float, float]:
    """(value, lo, hi) of sum(coef * p) over terms (coef, p, n), each p a proportion over n items: the Wilson
    interval of each p combined by MOVER (Zou & Donner 2008; for one difference it is Newcombe's method 10).
    `correlations` {(i, j): phi} gives the correlation of the proportions of terms i and j where they were measured on
    the same items (paired_phi); other pairs are treated as independent, which is conservative for proportions on the
    same items (positively correlated). lo/hi are NaN when any n is unknown."""
    value = float(sum(c * p for c, p, _ in terms))
    if not terms or any(n is None or not n > 0 for _, _, n in terms):
        return value, math.nan, math.nan
    below, above = [], []  # per term: how far c * p lies above its lower limit, below its upper one
    for c, p, n in terms:
        lo, hi = wilson(p * n, int(n))
        a, b = sorted((c * lo, c * hi))
        below.append(c * p - a)
        above.append(b - c * p)
    down, up = sum(d * d for d in below), sum(u * u for u in above)
    for (i, j), phi in (correlations or {}).items():
        r = phi * math.copysign(1.0, terms[i][0] * terms[j][0])  # the correlation of c_i p_i with c_j p_j
        down += 2 * r * below[i] * below[j]
        up += 2 * r * above[i] * above[j]
    return value, value - math.sqrt(max(down, 0.0)), value + math.sqrt(max(up, 0.0))


def paired_phi(x: list[float], y: list[float]) -> float:
    """The phi coefficient of two 0/1 outcomes on the same items (Newcombe 1998, method 10); 0 where a margin is
    empty (every item right, or every item wrong, for one of them)."""
    if len(x) != len(y):
        raise ValueError(f"paired outcomes need the same items: {len(x)} and {len(y)}")
    a = sum(1 for u, v in zip(x, y) if u and v)
    b = sum(1 for u, v in zip(x, y) if u and not v)
    c = sum(1 for u, v in zip(x, y) if v and not u)
    d = len(x) - a - b - c
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    return (a * d - b * c) / math.sqrt(margins) if margins else 0.0


def prompt_ids(df: pd.DataFrame) -> pd.Series:
    """Which prompt each TTFT row timed: its prompt_index (harness/measure/ttft.py), else its token count (a prompt
    set's prompts rarely share one)."""
    index = df["prompt_index"] if "prompt_index" in df.columns else pd.Series(None, index=df.index, dtype=float)
    tokens = df["prompt_tokens"] if "prompt_tokens" in df.columns else pd.Series(None, index=df.index, dtype=float)
    return pd.Series([f"p{int(i)}" if pd.notna(i) else (f"t{int(t)}" if pd.notna(t) else "?")
                      for i, t in zip(index, tokens)], index=df.index, dtype=object)


DIFFERENT_WORK = "different work"
OWN_WORK = "not the given workload"  # harness/measure/ttft.py: the engine ran its own prompt (llm.npu's demo)


def different_work(rows: pd.DataFrame, timed: pd.DataFrame) -> pd.Series:
    """For each row of `timed` (timing rows), why its engine did other work than the workload, or "" when it did the
    same: the engine ran its own prompt on its own files (its `workload` column says so: llm.npu's demo), or that run
    gave the engine other token ids than the workload's (`tokens_match` 0 for the same configuration, repetition and
    prompt, among `rows`). Such rows are never paired with another system's (ratios, intervals)."""
    out = pd.Series("", index=timed.index, dtype=object)
    if timed.empty:
        return out
    if "workload" in timed.columns:
        own = timed["workload"].fillna("").astype(str).str.startswith(OWN_WORK)
        out[own] = f"{DIFFERENT_WORK}: the engine ran its own prompt and model files, not the workload"
    match = rows[(rows["metric"] == "tokens_match") & (rows["status"] == "ok")] if len(rows) else rows
    if len(match):
        bad = match[match["value"] == 0]
        bad_runs = set(zip(bad["config_hash"], bad["repetition"], prompt_ids(bad)))
        runs = zip(timed["config_hash"], timed["repetition"], prompt_ids(timed))
        hit = pd.Series([r in bad_runs for r in runs], index=timed.index) & (out == "")
        out[hit] = f"{DIFFERENT_WORK}: the engine tokenized the prompt text to other ids than the workload's"
    return out


def unpaired_systems(rows: pd.DataFrame) -> dict[str, str]:
    """system -> why its timings did other work than the workload (different_work over the rows' ttft_s rows), for
    the systems that did: their numbers are shown, never divided by another system's."""
    timed = rows[rows["metric"] == "ttft_s"] if len(rows) else rows
    why = different_work(rows, timed)
    return {s: w for s, w in zip(timed.loc[why != "", "system"], why[why != ""])}


def _resampled_medians(groups: dict, prompts: list, idx: np.ndarray, rng) -> np.ndarray:
    """Median per resample: idx [B, P] draws prompts; each drawn prompt contributes as many repetitions, drawn with
    replacement, as it has. groups: prompt -> 1-D array of its repetitions' values (a prompt may be absent)."""
    reps = max((len(v) for v in groups.values()), default=0)
    if reps == 0:
        return np.full(idx.shape[0], np.nan)
    values = np.full((len(prompts), reps), np.nan)  # [P, R], padded with NaN
    counts = np.zeros(len(prompts), dtype=int)
    for i, p in enumerate(prompts):
        v = np.asarray(groups.get(p, []), dtype=float)
        values[i, :len(v)], counts[i] = v, len(v)
    cnt = counts[idx]                                                  # [B, P] repetitions of each drawn prompt
    rep = np.floor(rng.random((*idx.shape, reps)) * cnt[..., None]).astype(int)  # [B, P, R], < cnt
    sample = values[idx[..., None], rep]
    sample = np.where(np.arange(reps) < cnt[..., None], sample, np.nan).reshape(idx.shape[0], -1)
    out = np.full(idx.shape[0], np.nan)
    some = ~np.isnan(sample).all(axis=1)
    out[some] = np.nanmedian(sample[some], axis=1)
    return out


def bootstrap_ratio(num: pd.DataFrame, den: pd.DataFrame, datasets=None, resamples: int = BOOTSTRAP_RESAMPLES,
                    seed: int = BOOTSTRAP_SEED) -> dict:
    """TTFT ratio num / den (e.g. baseline / EdgeFlow) over rows with dataset, value and the prompt (prompt_ids), on
    the prompts both systems timed (a prompt one of them lacks would unpair the two medians): per dataset both have,
    median(num) / median(den); the ratio is their geometric mean over datasets. Its 95% interval: with at least
    BOOTSTRAP_MIN_PROMPTS common prompts in every dataset, the 2.5-97.5 percentile of a seeded bootstrap that, per
    dataset, draws prompts with replacement (the same draw for both systems) and each drawn prompt's repetitions with
    replacement (independently per system); with fewer (a percentile bootstrap over 3 prompts has 10 distinct
    resamples), the t-interval of the mean per-prompt log ratio (each prompt's median over its repetitions), per
    dataset, combined over datasets with Welch-Satterthwaite's degrees of freedom; the ratio is then that mean's.
    Returns ratio, lo, hi, datasets (count), prompts (the fewest common prompts of one dataset) and method."""
    empty = {"ratio": math.nan, "lo": math.nan, "hi": math.nan, "datasets": 0, "prompts": 0, "method": "none"}
    pairs = {}  # dataset -> ({prompt: num's values}, {prompt: den's values}) over the common prompts
    for d in sorted(set(num["dataset"].dropna()) & set(den["dataset"].dropna())):
        if datasets is not None and d not in set(datasets):
            continue
        a, b = num[num["dataset"] == d], den[den["dataset"] == d]
        ga = {p: g["value"].to_numpy(float) for p, g in a.groupby(prompt_ids(a))}
        gb = {p: g["value"].to_numpy(float) for p, g in b.groupby(prompt_ids(b))}
        both = sorted(set(ga) & set(gb))
        if both:
            pairs[d] = ({p: ga[p] for p in both}, {p: gb[p] for p in both})
    if not pairs:
        return empty
    fewest = min(len(ga) for ga, _ in pairs.values())
    if fewest >= BOOTSTRAP_MIN_PROMPTS:
        return {**_bootstrap(pairs, resamples, seed), "datasets": len(pairs), "prompts": fewest,
                "method": f"bootstrap over prompts ({resamples} resamples)"}
    return {**_t_interval_of_log_ratios(pairs), "datasets": len(pairs), "prompts": fewest,
            "method": "t-interval of per-prompt log ratios"}


def _bootstrap(pairs: dict, resamples: int, seed: int) -> dict:
    """ratio, lo, hi of bootstrap_ratio's bootstrap over `pairs` (dataset -> (num's, den's values per prompt))."""
    rng = np.random.default_rng(seed)
    point, boot = [], np.empty((resamples, len(pairs)))
    for j, (ga, gb) in enumerate(pairs.values()):
        prompts = list(ga)
        point.append(math.log(np.median(np.concatenate(list(ga.values())))
                              / np.median(np.concatenate(list(gb.values())))))
        idx = rng.integers(0, len(prompts), size=(resamples, len(prompts)))
        boot[:, j] = np.log(_resampled_medians(ga, prompts, idx, rng)) - np.log(_resampled_medians(gb, prompts, idx, rng))
    geo = boot.mean(axis=1)
    geo = geo[np.isfinite(geo)]
    ratio = math.exp(sum(point) / len(point))
    if not len(geo):
        return {"ratio": ratio, "lo": math.nan, "hi": math.nan}
    lo, hi = np.exp(np.percentile(geo, [2.5, 97.5]))
    # medians of few values are discrete: a percentile interval can miss the estimate itself; widen it to hold it
    return {"ratio": ratio, "lo": float(min(lo, ratio)), "hi": float(max(hi, ratio))}


def _t_interval_of_log_ratios(pairs: dict) -> dict:
    """ratio, lo, hi from the per-prompt log ratios log(median num / median den) of `pairs`: the mean over datasets
    of each dataset's mean, with the t-interval whose variance sums the datasets' (s_d^2 / n_d) / D^2 and whose
    degrees of freedom are Welch-Satterthwaite's; no interval when a dataset has fewer than two prompts."""
    from harness.eval.intervals import t975

    means, variances, dfs = [], [], []
    for ga, gb in pairs.values():
        r = np.array([math.log(np.median(ga[p]) / np.median(gb[p])) for p in ga])
        means.append(r.mean())
        variances.append(r.var(ddof=1) / len(r) if len(r) > 1 else math.nan)
        dfs.append(len(r) - 1)
    d = len(means)
    est = float(np.mean(means))
    v = np.array(variances)
    if not np.isfinite(v).all():
        return {"ratio": math.exp(est), "lo": math.nan, "hi": math.nan}
    if v.sum() == 0:
        return {"ratio": math.exp(est), "lo": math.exp(est), "hi": math.exp(est)}
    df = v.sum() ** 2 / sum(x * x / k for x, k in zip(v, dfs))
    half = t975(df) * math.sqrt(v.sum()) / d
    return {"ratio": math.exp(est), "lo": math.exp(est - half), "hi": math.exp(est + half)}


# --- verdicts -----------------------------------------------------------------------------------------------------------

def _finite(x) -> bool:
    return x is not None and isinstance(x, (int, float, np.floating)) and math.isfinite(x)


def _judge(point: float, lo: float, hi: float, paper: float, tol: float) -> str:
    """The rule on an additive scale with no effect at 0 (log ratios, accuracy differences): see VERDICT_RULES."""
    inside = lo - tol <= paper <= hi + tol
    if abs(paper) <= tol:  # the paper states no winner: our whole interval must show no effect beyond the tolerance
        if -tol <= lo and hi <= tol:
            return REPRODUCED
        return DIFFERS if lo > tol or hi < -tol else INCONCLUSIVE
    ours = 1 if lo > 0 else -1 if hi < 0 else 0  # our established direction, 0 when the interval includes no effect
    side = 1 if paper > 0 else -1
    if ours == side:
        return REPRODUCED if inside else SAME_DIRECTION
    if ours == -side:
        return DIFFERS
    return INCONCLUSIVE if inside else DIFFERS


def _interval_or_point(value: float, interval: tuple | None, caps, positive: bool = False) -> tuple:
    """(lo, hi, caps): our interval, or without a usable one (`positive`: a ratio's must lie above 0) the point
    itself with the cap "no interval" added (a single measurement)."""
    caps = list(caps)
    lo, hi = interval if interval is not None else (math.nan, math.nan)
    if not (_finite(lo) and _finite(hi) and lo <= hi and (lo > 0 or not positive)):
        return value, value, [*caps, "no interval"]
    return lo, hi, caps


def cap(verdict: str, reasons) -> str:
    """The qualitative cap: with any reason (different model, device, proxy data, no interval) a reproduced or
    same-direction verdict becomes qualitative."""
    return QUALITATIVE if reasons and verdict in (REPRODUCED, SAME_DIRECTION) else verdict


def ratio_verdict(ours: float, paper: float, tol: float = RATIO_TOLERANCE, interval: tuple | None = None,
                  caps=(), datasets: int | None = None, prompts: int | None = None,
                  min_datasets: int = MIN_DATASETS) -> str:
    """Verdict on a ratio (> 1: the first system slower). `interval` is our 95% interval (lo, hi); without one the
    number is a single measurement and capped. `datasets`/`prompts` (when given) must reach MIN_DATASETS (or
    `min_datasets` when the paper's statement covers fewer) and MIN_PROMPTS, else inconclusive. `caps`: reasons
    for the qualitative cap (cap_reasons)."""
    if not _finite(ours) or ours <= 0 or not _finite(paper) or paper <= 0:
        return NOT_RUN
    if (datasets is not None and datasets < min(min_datasets, MIN_DATASETS)) or \
            (prompts is not None and prompts < MIN_PROMPTS):
        return INCONCLUSIVE
    lo, hi, caps = _interval_or_point(ours, interval, caps, positive=True)
    if hi > MAX_RATIO_SPREAD * lo:
        return INCONCLUSIVE
    v = _judge(math.log(ours), math.log(lo), math.log(hi), math.log(paper), math.log1p(tol))
    return cap(v, caps)


def points_verdict(ours_pp: float, paper_pp: float, tol: float = ACCURACY_TOLERANCE_PP,
                   interval: tuple | None = None, caps=()) -> str:
    """Verdict on an accuracy difference in percentage points (drop or gain), our 95% interval `interval`."""
    if not _finite(ours_pp) or not _finite(paper_pp):
        return NOT_RUN
    lo, hi, caps = _interval_or_point(ours_pp, interval, caps)
    if hi - lo > MAX_POINTS_WIDTH_PP:
        return INCONCLUSIVE
    return cap(_judge(ours_pp, lo, hi, paper_pp, tol), caps)


def percent_verdict(ours_pp: float, paper_pct: float, reference: float | None, interval: tuple | None = None,
                    caps=()) -> str:
    """Verdict on an accuracy difference the paper gives in "%" against ours in percentage points: its "%" may be
    points or percent of the accuracy it is relative to (`reference`, a fraction: the baseline's accuracy, ours).
    Both readings are judged by points_verdict; when they disagree the unit decides, so the verdict is inconclusive."""
    as_points = points_verdict(ours_pp, paper_pct, interval=interval, caps=caps)
    if reference is None or not _finite(reference):
        return INCONCLUSIVE if as_points not in (NOT_RUN, INCONCLUSIVE, DIFFERS) else as_points
    as_relative = points_verdict(ours_pp, paper_pct * reference, interval=interval, caps=caps)
    return as_points if as_points == as_relative else INCONCLUSIVE


def percent_text(paper_pct: float, reference: float | None) -> str:
    """'2.52% (2.52 pp, or 1.13 pp if relative to 44.8%)': the paper's "%" in both readings."""
    if reference is None or not _finite(reference):
        return f"{paper_pct:.2f}% (unit unknown: points or relative)"
    return f"{paper_pct:.2f}% ({paper_pct:.2f} pp, or {paper_pct * reference:.2f} pp if relative to {reference:.1%})"


def share_verdict(ours: float, paper: float, interval: tuple | None = None, caps=()) -> str:
    """Verdict on a share or rate (a fraction of a whole, 0-1: a bubble rate, the share of a cold start spent
    loading) on an additive scale: reproduced when the paper's value lies within our interval widened by
    SHARE_TOLERANCE_PP percentage points, else differs (a share has no direction to agree on); capped like the rest."""
    if not _finite(ours) or not _finite(paper):
        return NOT_RUN
    lo, hi, caps = _interval_or_point(ours, interval, caps)
    if 100 * (hi - lo) > MAX_POINTS_WIDTH_PP:
        return INCONCLUSIVE
    tol = SHARE_TOLERANCE_PP / 100
    return cap(REPRODUCED if lo - tol <= paper <= hi + tol else DIFFERS, caps)


def at_most_verdict(ours: float, paper: float, tol: float = RATIO_TOLERANCE) -> str:
    """A count where fewer is better (instructions per weight; deterministic, no interval): reproduced when ours is
    at most the paper's x(1+tol), else differs."""
    if not _finite(ours) or not _finite(paper):
        return NOT_RUN
    return REPRODUCED if ours <= paper * (1 + tol) else DIFFERS


def overall(verdicts: list[str]) -> tuple[str, str]:
    """(artifact verdict, one-line count) from the per-comparison verdicts, by the rule stated in VERDICT_RULES."""
    n = {v: verdicts.count(v) for v in VERDICTS}
    count = f"{n[REPRODUCED]} of {len(verdicts)} comparisons reproduced" + "".join(
        f", {n[v]} {v}" for v in (QUALITATIVE, SAME_DIRECTION, DIFFERS, INCONCLUSIVE, NOT_RUN) if n[v])
    if not verdicts or n[NOT_RUN] == len(verdicts):
        return NOT_RUN, "no comparison possible"
    if n[REPRODUCED] == len(verdicts):
        return REPRODUCED, count
    if n[REPRODUCED]:
        return PARTLY, count
    for v in (DIFFERS, QUALITATIVE, SAME_DIRECTION):
        if n[v]:
            return v, count
    return INCONCLUSIVE, count


def interval_text(value: float, lo: float, hi: float, digits: int = 3, unit: str = "") -> str:
    """'1.23 [1.10–1.40]' (or just the value when the interval is unknown)."""
    if not _finite(value):
        return "–"
    if _finite(lo) and _finite(hi):
        return f"{fmt(value, digits)}{unit} [{fmt(lo, digits)}–{fmt(hi, digits)}]"
    return f"{fmt(value, digits)}{unit} (no interval)"


# --- output -------------------------------------------------------------------------------------------------------------

def fmt(x, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    return f"{x:.0f}" if 10 ** digits <= abs(x) < 1e7 else f"{x:.{digits}g}"


def md_table(df: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown table (cells already formatted as text where it matters)."""
    if df.empty:
        return "_(no rows)_\n"
    df = df[[c for c in df.columns if not str(c).startswith("_")]]  # "_caps" and the like: data, not columns
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
