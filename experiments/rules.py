"""The verdict rules: our number with its 95% interval against the paper's under one stated rule (`VERDICT_RULES`,
printed once in the report, each clause tested in tests/experiments/test_verdicts.py), the caps that keep a verdict
qualitative (a model, device or dataset that is not the paper's; EdgeFlow without its NPU), and the paper's claims as
scoreboard rows."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from harness.quant.outputs import NPU_NUMERICS
from harness.runner.store import QUALITY_METRICS
from harness.systems.base import CPU_THREADS
from experiments.lineup import is_proposed
from experiments.selection import dataset_source, on_paper_device, with_conditions
from experiments.stats import BOOTSTRAP_MIN_PROMPTS, BOOTSTRAP_RESAMPLES, finite


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


REPRODUCED, SAME_DIRECTION, DIFFERS, NOT_RUN = "reproduced", "same direction", "differs", "not run"
QUALITATIVE, INCONCLUSIVE, PARTLY = "qualitative", "inconclusive", "partly reproduced"
VERDICTS = (REPRODUCED, QUALITATIVE, SAME_DIRECTION, DIFFERS, INCONCLUSIVE, NOT_RUN)  # a comparison's, counted so
INPUT = "input"  # a section showing what went into the measurement (Table 3), not a result: no verdict
NO_CLAIM = "no paper claim"
NOT_MEASURED = "not measured by"  # a not-run reason a rerun cannot remove: what ran does not report that number  # a section of ours beside no claim of the paper (compare-quantizers): no verdict


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
            if any(c.startswith(NOT_MEASURED) for c in self.caps):  # a rerun would not help: nothing measures it
                return f"a series that measures it ({why})"
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


NO_NPU = "EdgeFlow's accelerator half ran on CPU threads, not on an NPU"
SIMULATED_NPU = "EdgeFlow's accelerator half was simulated at assumed NPU speeds, not run on an NPU"


def npu_caps(df: pd.DataFrame, timing: bool) -> list[str]:
    """Why EdgeFlow's numbers among these rows are not those of the paper's system, which runs its INT8 matmuls on an
    NPU: for a timing, an accelerator half that ran on CPU threads (a row's `accelerator`; rows without one were timed
    by the runtime, whose lane is CPU threads on every device) or in a simulator; for a quality number, numerics that
    are not the NPU's (a row's `numerics`)."""
    ef = df[is_proposed(df)] if len(df) else df
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
    if not (finite(lo) and finite(hi) and lo <= hi and (lo > 0 or not positive)):
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
    if not finite(ours) or ours <= 0 or not finite(paper) or paper <= 0:
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
    if not finite(ours_pp) or not finite(paper_pp):
        return NOT_RUN
    lo, hi, caps = _interval_or_point(ours_pp, interval, caps)
    if hi - lo > MAX_POINTS_WIDTH_PP:
        return INCONCLUSIVE
    return cap(_judge(ours_pp, lo, hi, paper_pp, tol), caps)


def percent_verdict(ours_pp: float, paper_pct: float, reference: float | None, interval: tuple | None = None,
                    caps=()) -> str:
    """Verdict on an accuracy difference the paper gives in "%" against ours in percentage points: its "%" may be
    points or percent of the accuracy it is relative to (`reference`, a fraction: the baseline's accuracy, ours).
    Both readings are judged by points_verdict before the cap (capped, "same direction" and "reproduced" would both
    read "qualitative" and seem to agree); when they disagree the unit decides, so the verdict is inconclusive, else
    the agreed verdict, capped."""
    as_points = points_verdict(ours_pp, paper_pct, interval=interval)
    if reference is None or not finite(reference):
        return INCONCLUSIVE if as_points not in (NOT_RUN, INCONCLUSIVE, DIFFERS) else as_points
    as_relative = points_verdict(ours_pp, paper_pct * reference, interval=interval)
    return cap(as_points, caps) if as_points == as_relative else INCONCLUSIVE


def percent_text(paper_pct: float, reference: float | None) -> str:
    """'2.52% (2.52 pp, or 1.13 pp if relative to 44.8%)': the paper's "%" in both readings."""
    if reference is None or not finite(reference):
        return f"{paper_pct:.2f}% (unit unknown: points or relative)"
    return f"{paper_pct:.2f}% ({paper_pct:.2f} pp, or {paper_pct * reference:.2f} pp if relative to {reference:.1%})"


def share_verdict(ours: float, paper: float, interval: tuple | None = None, caps=()) -> str:
    """Verdict on a share or rate (a fraction of a whole, 0-1: a bubble rate, the share of a cold start spent
    loading) on an additive scale: reproduced when the paper's value lies within our interval widened by
    SHARE_TOLERANCE_PP percentage points, else differs (a share has no direction to agree on); capped like the rest."""
    if not finite(ours) or not finite(paper):
        return NOT_RUN
    lo, hi, caps = _interval_or_point(ours, interval, caps)
    if 100 * (hi - lo) > MAX_POINTS_WIDTH_PP:
        return INCONCLUSIVE
    tol = SHARE_TOLERANCE_PP / 100
    return cap(REPRODUCED if lo - tol <= paper <= hi + tol else DIFFERS, caps)


def at_most_verdict(ours: float, paper: float, tol: float = RATIO_TOLERANCE) -> str:
    """A count where fewer is better (instructions per weight; deterministic, no interval): reproduced when ours is
    at most the paper's x(1+tol), else differs."""
    if not finite(ours) or not finite(paper):
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
