"""Figure 10: cold-start TTFT (bars, log scale) and accuracy (lines) of llama.cpp, MNN, llm.npu+ and EdgeFlow at 4-7
average bits, per model and dataset; beside it our TTFT ratios (baseline / EdgeFlow) against the paper's.

Rows come from the store folders `ttft` (metric ttft_s, one row per prompt and repetition) and `accuracy` (metric
accuracy, a fraction over its `items`); only the latest successful attempt of each configuration
counts. TTFT is drawn and compared per measurement condition (model, device, flash setting, prompt source), accuracy
per model and dataset source: rows of different conditions are never pooled. Bars are medians over prompts and
repetitions with min-max error bars. The paper's per-bar values were lost in the text extraction; its ratios
(section 5.2) are the reference, and they summarise the figure over models and datasets. Our ratios carry a paired
bootstrap interval, our accuracy drops a Wilson/MOVER interval (rules.VERDICT_RULES).
"""
from __future__ import annotations

import itertools
import math
import textwrap
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from experiments import lineup, output, paper_values, rules, selection, stats
from experiments.base import SweepArtifact, register_artifact
from experiments.output import Section, fmt, md_table
from harness.measure.workload import check_rows
from harness.quant.outputs import NPU_NUMERICS

NAME = "fig10"
TITLE = "Figure 10 - cold-start TTFT and accuracy per system, model and dataset"
EXPERIMENTS = ("ttft", "accuracy", "fidelity")

BITS = (4, 5, 6, 7)
DATASETS = ("lambada", "winogrande", "openbookqa", "mmlu", "hellaswag")
PAPER_MODELS = {"llama3-8b", "phi3-3.8b"}
EF = lineup.label(lineup.proposed(), short=True)  # "EF" as in the paper's Figure 10 (the system's `short`)
PAPER_PEER = "llmnpu"  # the paper's series of its two llm.npu+ statements (fig10.csv); lineup.playing finds ours


def ef_series(bits: float) -> str:
    return lineup.series_name(lineup.proposed(), bits, short=True)  # "EF 5b"


def _label(system: str) -> str:
    return lineup.label(system, short=True)


def _peer_series() -> str | None:
    """The series of the system that plays the paper's llm.npu+, or None when none does."""
    peer = lineup.playing(PAPER_PEER)
    return _label(peer) if peer else None
# Accuracy is computed by the engine a row names (harness/runner/kinds.py): EdgeFlow's runtime over its packed file;
# an engine that cannot score here gives a "not run" row with the reason. Beside them, the fake-quant models of the
# baselines' weight formats are drawn as their own series, "stand-in (fake-quant ...)", never under an engine's name:
# all baselines keep INT8 weights (section 5.2); llm.npu's are per-tensor INT8 with shadow outliers.
# conf/quantizer option -> (the quantizer's name in the rows, the series name); both at 8 bits.
STAND_INS = {"int8": ("uniform", "stand-in (fake-quant INT8)"),
             "shadow_outlier": ("shadow_outlier", "stand-in (fake-quant INT8, shadow outliers)")}
STAND_IN_SERIES = {name: series for name, series in STAND_INS.values()}


def sweep(models=("smollm2-135m",), datasets=DATASETS, systems: tuple[str, ...] | None = None, bits=BITS, device="local",
          flash_mbps: float | None = None, kinds=EXPERIMENTS, ttft_prompts: int = 3,
          eval_limit: int = 100, fidelity_windows: int = 8) -> list[list[str]]:
    """Hydra override lists: for each model x dataset x system (every system by default, lineup.py; x bits for
    EdgeFlow, at its own quantizer and packing; the others bring their own format), one TTFT and one accuracy point;
    per model x system (x bits), one fidelity point (KL against the FP16 model on held-out text, by the engine).
    `flash_mbps` emulates a phone's flash for every system alike (device.flash_read_mbps). `ttft_prompts` prompts
    per dataset (each cold, x the protocol's repetitions) and `eval_limit` items per accuracy task keep the default
    run within ~20 minutes on a 2-core host; raise them for tighter error bars."""
    systems = lineup.systems() if systems is None else tuple(systems)
    lineup.check(systems, "fig10")
    weights = lineup.budget_overrides
    points = []
    for model, dataset, system in itertools.product(models, datasets, systems):
        for b in lineup.budgets(system, bits):
            base = [f"model={model}", f"system={system}", f"dataset={dataset}"]
            if "ttft" in kinds:
                dev = [f"device={device}"] + ([f"device.flash_read_mbps={float(flash_mbps)}"] if flash_mbps else [])
                points.append(["experiment=ttft", *base, *weights(system, b), *dev,
                               f"experiment.extra.n_prompts={ttft_prompts}"])
            if "accuracy" in kinds:
                points.append(["experiment=accuracy", *base, *weights(system, b),
                               f"experiment.eval_limit={eval_limit}"])
    wanted = [q for q in STAND_INS if q in {lineup.stand_in(s) for s in systems}]
    if "accuracy" in kinds:
        for model, dataset, option in itertools.product(models, datasets, wanted):
            points.append(["experiment=accuracy", f"model={model}", f"dataset={dataset}", f"quantizer={option}",
                           "quantizer.budget_bits=8.0", f"experiment.eval_limit={eval_limit}"])
    if "fidelity" in kinds:
        windows = f"experiment.extra.fidelity_windows={fidelity_windows}"
        for model, system in itertools.product(models, systems):
            for b in lineup.budgets(system, bits):
                points.append(["experiment=fidelity", f"model={model}", f"system={system}", *weights(system, b),
                               windows])
        for model, option in itertools.product(models, wanted):
            points.append(["experiment=fidelity", f"model={model}", f"quantizer={option}", "quantizer.budget_bits=8.0",
                           windows])
    return points


# --- tidy our rows into series --------------------------------------------------------------------------------------------

def series_name(system: str | None, bits, quantizer: str | None = None) -> str:
    if system is None or pd.isna(system):
        return STAND_IN_SERIES.get(quantizer, f"stand-in (fake-quant {quantizer})")
    return lineup.series_name(system, bits, short=True)


# EdgeFlow's rows computed with numerics other than the NPU's (an artifact with float outputs:
# +quantizer.output_grid=none; a row's `numerics`) are a series of their own beside EF at those bits, named by what
# computed them, never pooled with EdgeFlow's and never in a verdict (they carry no ef_bits).
OTHER_NUMERICS = {"float outputs": "CPU only (float outputs)"}


def _with_series(df: pd.DataFrame) -> pd.DataFrame:
    """Figure 10's rows among the store's: other artifacts share the ttft/accuracy folders (Figure 12 evaluates
    other quantizers, ablations other packings), so EdgeFlow rows must be its own quantizer, packing and pipeline
    (lineup.own_rows)."""
    own = lineup.own_rows(df)
    stand_in = (df["metric"].isin(["accuracy", *QUALITY]) & df["system"].isna()
                & df["quantizer"].isin(list(STAND_IN_SERIES)) & (df["bits"] == 8))
    df = df[(df["system"].isin(lineup.systems()) & own) | stand_in].copy()
    df["series"] = [series_name(s, b, q) for s, b, q in zip(df["system"], df["bits"], df["quantizer"])]
    numerics = df["numerics"] if "numerics" in df.columns else pd.Series(None, index=df.index, dtype=object)
    other = (df["system"] == lineup.proposed()) & numerics.notna() & (numerics != NPU_NUMERICS)
    df.loc[other, "series"] = [f"{s}, {OTHER_NUMERICS.get(n, n)}" for s, n in zip(df["series"][other], numerics[other])]
    # EdgeFlow's bits as data, not its label: only where it computed what the NPU computes
    df["ef_bits"] = df["bits"].where((df["system"] == lineup.proposed()) & ~other)
    return df


def series_order(frame: pd.DataFrame) -> list[str]:
    """The series of `frame` (rows or a summary, with _with_series' columns) in drawing order: the peers in the
    lineup's order, the stand-ins, EdgeFlow's by their bits (the rows' ef_bits, never read off a label), the rest."""
    series = set(frame["series"].dropna()) if "series" in frame.columns else set()
    base = [_label(s) for s in lineup.peers() if _label(s) in series]
    stand = [s for s in STAND_IN_SERIES.values() if s in series]
    ef = list(_ef_columns(frame))
    return base + stand + ef + sorted(series - set(base) - set(stand) - set(ef))


# TTFT depends on the model, the device, its flash setting and the prompts' source; accuracy on the model and the
# dataset's source (builtin lm-eval task or local proxy), not on the device. Rows differing in these are never pooled.
TTFT_CONDITION = ["model", "device", "flash", "source"]
ACC_CONDITION = ["model", "source"]
TTFT_KEYS = [*TTFT_CONDITION, "dataset", "series", "ef_bits"]  # a TTFT summary's rows (ef_bits: _with_series)


def _ef_columns(summary: pd.DataFrame) -> dict[str, float]:
    """EdgeFlow's series in a summary -> its bits (the rows' own, never read off the series' label)."""
    ef = summary[summary["ef_bits"].notna()] if "ef_bits" in summary.columns else summary.iloc[:0]
    return dict(sorted(zip(ef["series"], ef["ef_bits"]), key=lambda item: item[1]))


@dataclass
class Tidy:
    """Figure 10's rows summarised: medians with their spread (median, min, max, n) per condition, dataset and
    series, the rows behind them (for the intervals) and why configurations did not run."""

    ttft: pd.DataFrame            # timings of the same work as every other system's: the ones paired into ratios
    ttft_all: pd.DataFrame        # every timing, also those of other work (what is drawn)
    different_work: dict[str, str]  # series -> why its timings did other work than the workload
    accuracy: pd.DataFrame        # with "items": what each accuracy is over (its Wilson interval)
    ttft_rows: pd.DataFrame       # the rows behind `ttft`, one per prompt and repetition
    unrun: pd.DataFrame           # failed / not-run rows with their one-line reason
    prompt_tokens: pd.DataFrame   # model, dataset, min, max: the prompts' lengths


def tidy(rows: pd.DataFrame) -> Tidy:
    """Figure 10's rows summarised (Tidy). Only the latest successful attempt of each configuration counts."""
    rows = selection.with_conditions(_with_series(selection.current(rows)))
    timed = selection.ok_rows(rows, "ttft_s")
    # the systems compared did the same work (harness/measure/workload.py); rows of other work are drawn but never
    # paired (ratios, intervals, statements)
    check_rows(timed, by=(*TTFT_CONDITION, "dataset"))
    other = selection.different_work(rows, timed)
    ttft_rows = timed[other == ""]
    unpaired = timed[other != ""].assign(reason=other[other != ""])
    acc_rows = selection.ok_rows(rows, "accuracy")
    # Runs over different item counts (eval_limit) are different measurements, never pooled: each series keeps
    # those over the most items.
    keys = [*ACC_CONDITION, "dataset", "series"]
    if len(acc_rows):
        most = acc_rows.groupby(keys)["items"].transform(lambda n: n.max() if n.notna().any() else math.nan)
        acc_rows = acc_rows[(acc_rows["items"] == most) | most.isna()]
    acc = selection.summarize(acc_rows, [*keys, "ef_bits"])
    if len(acc):  # items behind each accuracy (deterministic reruns are the same items: the fewest, not the sum)
        items = acc_rows.groupby(keys)["items"].min()
        acc["items"] = [items.get(tuple(k)) for k in acc[keys].itertuples(index=False)]
    else:
        acc["items"] = pd.Series(dtype=float)
    return Tidy(
        ttft=selection.summarize(ttft_rows, TTFT_KEYS),
        ttft_all=selection.summarize(timed, TTFT_KEYS),
        different_work=unpaired.groupby("series")["reason"].first().to_dict() if len(unpaired) else {},
        accuracy=acc,
        ttft_rows=ttft_rows,
        unrun=selection.unrun_reasons(rows),
        prompt_tokens=rows[(rows["status"] == "ok") & rows["prompt_tokens"].notna()]
        .groupby(["model", "dataset"])["prompt_tokens"].agg(["min", "max"]).reset_index(),
    )


def _conditions(frame: pd.DataFrame, keys: list[str]):
    """(dict of condition values, sub-frame) per condition present in `frame`."""
    keys = [k for k in keys if k in frame.columns]
    for values, per in frame.groupby(keys, sort=True):
        yield dict(zip(keys, values if isinstance(values, tuple) else (values,))), per


def ratios(ttft: pd.DataFrame, ttft_rows: pd.DataFrame | None = None, datasets=None,
           series: dict[str, str] | None = None) -> pd.DataFrame:
    """Our baseline/EdgeFlow TTFT ratio per condition (model, device, flash, source), baseline and EdgeFlow bits: the
    geometric mean over the datasets where both ran of median(baseline) / median(EdgeFlow). With the rows behind the
    summary, its bootstrap 95% interval (stats.bootstrap_ratio), the datasets and the fewest prompts per dataset.
    `series`: baseline -> the series that stands for it (default: each baseline's own)."""
    cols = [*TTFT_CONDITION, "system", "bits", "ratio", "lo", "hi", "datasets", "prompts", "method"]
    series = series or {b: _label(b) for b in lineup.peers()}
    out = []
    for cond, per in _conditions(ttft, TTFT_CONDITION):
        wide = per.pivot_table(index="dataset", columns="series", values="median")
        if datasets is not None:
            wide = wide.reindex([d for d in wide.index if d in set(datasets)])
        for base, (ef, bits) in itertools.product(series, _ef_columns(per).items()):
            name = series[base]
            if name not in wide.columns or ef not in wide.columns:
                continue
            r = (wide[name] / wide[ef]).dropna()
            if not len(r):
                continue
            line = {**cond, "system": base, "bits": bits, "ratio": float(np.exp(np.log(r).mean())),
                    "lo": math.nan, "hi": math.nan, "datasets": len(r), "prompts": math.nan, "method": "none"}
            if ttft_rows is not None:
                mine = _select(ttft_rows, cond)
                b = stats.bootstrap_ratio(mine[mine["series"] == name], mine[mine["series"] == ef], datasets=r.index)
                # the interval's own estimate (on the prompts both timed), so that it always holds its ratio
                line.update(ratio=b["ratio"], lo=b["lo"], hi=b["hi"], datasets=b["datasets"], prompts=b["prompts"],
                            method=b["method"])
            out.append(line)
    return pd.DataFrame(out, columns=cols)


def work_table(rows: pd.DataFrame) -> pd.DataFrame:
    """What each system's TTFT runs did, from their rows: the compute-thread budget (the workload record, the same for
    every system: harness/measure/workload.py checks it), the threads outside it that the engine reports, how the
    prompt went in, and the share of runs whose engine tokenized the text to exactly the workload's ids."""
    import json

    ok = rows[(rows["status"] == "ok") & rows["series"].notna()]
    ttft = ok[ok["metric"] == "ttft_s"]
    if ttft.empty or "workload" not in ttft.columns:
        return pd.DataFrame()
    out = []
    for series in series_order(ttft):
        g, mine = ttft[ttft["series"] == series], ok[ok["series"] == series]
        threads = sorted({json.loads(w)["threads"] for w in g["workload"].dropna() if str(w).startswith("{")})
        match = mine.loc[mine["metric"] == "tokens_match", "value"]
        engine = g["system"].iloc[0]  # an engine reports its threads as <system>_<kind>_threads
        counts = {k: mine.loc[mine["metric"] == f"{engine}_{k}_threads", "value"].median()
                  for k in ("io", "unpack", "cpu", "accel")}  # NaN: the engine reports no such threads
        extra = [f"{int(counts[k])} {what}" for k, what in (("io", "I/O"), ("unpack", "unpack"))
                 if counts[k] == counts[k] and counts[k] > 0]  # unpack 0: it runs on the compute threads
        split = [f"{int(counts[k])} {k}" for k in ("cpu", "accel") if counts[k] == counts[k]]
        out.append({"series": series, "compute threads": ", ".join(map(str, threads)) or "–",
                    "lanes": " + ".join(split) or "one pool",
                    "threads outside the budget": " + ".join(extra) or "none reported",
                    "prompt": "text, tokenized inside the clock" if len(match) else "token ids",
                    "same ids as the workload": f"{match.mean():.0%} of {len(match)} runs" if len(match) else "–"})
    return pd.DataFrame(out)


def startup_table(rows: pd.DataFrame) -> pd.DataFrame:
    """For each system whose TTFT includes a start-up the harness adds and the engine has not on a phone (its
    `startup_metric`: MNN runs through its Python API, so its TTFT includes the interpreter's start and `import MNN`,
    which its driver measures in the same run), per condition and EdgeFlow bits: its ratio over EF as measured and
    with each run's start-up subtracted, both with their bootstrap intervals. What the metric does not cover (MNN:
    the interpreter's own start before the driver's first line) stays in."""
    ok, out = rows[rows["status"] == "ok"], []
    key = ["config_hash", "workload", "repetition"]
    for system in lineup.peers():
        metric, name = lineup.startup_metric(system), _label(system)
        ttft = ok[(ok["series"] == name) & (ok["metric"] == "ttft_s")]
        start = ok[(ok["series"] == name) & (ok["metric"] == metric)].drop_duplicates(key)
        if metric is None or ttft.empty or start.empty:
            continue
        minus = ttft.merge(start[[*key, "value"]].rename(columns={"value": "start"}), on=key)
        without_name = f"{name} without {metric}"
        derived = minus.assign(value=minus["value"] - minus["start"], series=without_name).drop(columns="start")
        both = pd.concat([selection.ok_rows(rows, "ttft_s"), derived], ignore_index=True)
        summary = selection.summarize(both, TTFT_KEYS)
        measured = ratios(summary, both, series={system: name})
        without = ratios(summary, both, series={system: without_name})
        paired = measured.merge(without, on=[*TTFT_CONDITION, "bits"], suffixes=("", "_without"))
        out.append(pd.DataFrame({
            "condition": [_where({k: r[k] for k in TTFT_CONDITION}) for _, r in paired.iterrows()],
            "system": name, f"{EF} bits": [f"{b:g}" for b in paired["bits"]],
            f"ratio over {EF}, as measured [95%]": [output.interval_text(r.ratio, r.lo, r.hi)
                                                   for r in paired.itertuples()],
            "without the start-up [95%]": [output.interval_text(r.ratio_without, r.lo_without, r.hi_without)
                                           for r in paired.itertuples()],
            "start-up": metric, "start-up, median over its runs (s)": fmt(float(start["value"].median()))}))
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame()


def _diff_terms(wide: pd.DataFrame, items: pd.DataFrame, plus: list[str], minus: str) -> tuple[list, int]:
    """MOVER terms for mean over datasets of (mean of the `plus` columns - `minus`), and the datasets used."""
    rows = [d for d in wide.index if pd.notna(wide.loc[d, minus]) and wide.loc[d, plus].notna().any()]
    terms = []
    for d in rows:
        present = [c for c in plus if pd.notna(wide.loc[d, c])]
        for c in present:
            terms.append((1 / (len(rows) * len(present)), float(wide.loc[d, c]), _items(items, d, c)))
        terms.append((-1 / len(rows), float(wide.loc[d, minus]), _items(items, d, minus)))
    return terms, len(rows)


def _items(items: pd.DataFrame, dataset: str, series: str):
    v = items.loc[dataset, series] if dataset in items.index and series in items.columns else None
    return None if v is None or pd.isna(v) else int(v)


def accuracy_drops(acc: pd.DataFrame) -> pd.DataFrame:
    """EdgeFlow's accuracy drop vs the mean of the baselines, in percentage points, averaged over datasets, per model
    and dataset source; its 95% interval combines each accuracy's Wilson interval (stats.combination_interval).
    `versus` names what the baselines' accuracy came from: the engines' own rows, or (none of them measured) the
    stand-in series of their weight formats."""
    out = []
    for cond, per in _conditions(acc, ACC_CONDITION):
        wide = per.pivot_table(index="dataset", columns="series", values="median")
        items = per.pivot_table(index="dataset", columns="series", values="items") if "items" in per else pd.DataFrame()
        base_cols = [_label(b) for b in lineup.peers() if _label(b) in wide.columns]
        versus = "the baselines' own accuracy"
        if not base_cols:
            base_cols = [s for s in STAND_IN_SERIES.values() if s in wide.columns]
            versus = "stand-ins: " + ", ".join(base_cols)
        if not base_cols:
            continue
        for ef, bits in _ef_columns(per).items():
            if ef not in wide.columns:
                continue
            terms, n = _diff_terms(wide, items, base_cols, ef)
            if n:
                v, lo, hi = stats.combination_interval(terms)
                # the baselines' mean accuracy on the datasets compared: what a relative "%" would be relative to
                reference = float(wide.loc[wide[ef].notna(), base_cols].mean(axis=1).mean())
                out.append({**cond, "bits": bits, "drop_pp": round(100 * v, 9), "lo": 100 * lo,
                            "hi": 100 * hi, "datasets": n, "versus": versus, "reference": reference})
    return pd.DataFrame(out, columns=[*ACC_CONDITION, "bits", "drop_pp", "lo", "hi", "datasets", "versus",
                                      "reference"])


LONG_PROMPTS = ("mmlu", "hellaswag")


def llmnpu_statements(t: Tidy) -> list[dict]:
    """Our numbers for the paper's two llm.npu+ statements: the TTFT ratio range on long prompts (MMLU, HellaSwag;
    EdgeFlow at its default 5 bits; per dataset, and their geometric mean with its bootstrap interval) and the largest
    accuracy gain over llm.npu+ (percentage points, mean over datasets, max over bits, with that bit's interval)."""
    out, npu = [], _peer_series()
    if npu is None:
        return out
    for cond, per in _conditions(t.ttft, TTFT_CONDITION):
        wide = per.pivot_table(index="dataset", columns="series", values="median")
        if {npu, ef_series(5)} <= set(wide.columns):
            r = (wide[npu] / wide[ef_series(5)]).reindex(list(LONG_PROMPTS)).dropna()
            if len(r):
                rows = _select(t.ttft_rows, cond)
                b = stats.bootstrap_ratio(rows[rows["series"] == npu], rows[rows["series"] == ef_series(5)],
                                          datasets=r.index)
                out.append({**cond, "metric": "ttft_ratio_long", "min": float(r.min()), "max": float(r.max()),
                            "value": b["ratio"], "lo": b["lo"], "hi": b["hi"], "datasets": len(r),
                            "prompts": b["prompts"]})
    for cond, per in _conditions(t.accuracy, ACC_CONDITION):
        wide = per.pivot_table(index="dataset", columns="series", values="median")
        items = per.pivot_table(index="dataset", columns="series", values="items") if "items" in per else pd.DataFrame()
        efs = [ef for ef in _ef_columns(per) if ef in wide.columns]
        if npu in wide.columns and efs:
            gains = [stats.combination_interval(_diff_terms(wide, items, [ef], npu)[0]) for ef in efs]
            gains = [g for g in gains if math.isfinite(g[0])]
            if gains:
                v, lo, hi = max(gains, key=lambda g: g[0])
                out.append({**cond, "metric": "accuracy_gain_max", "min": 100 * v, "max": 100 * v, "value": 100 * v,
                            "lo": 100 * lo, "hi": 100 * hi, "reference": float(wide[npu].mean())})
    return out


# --- figure -----------------------------------------------------------------------------------------------------------------

def series_colors(frame: pd.DataFrame) -> dict[str, tuple]:
    """Each series' colour: the peers' their own (lineup), EdgeFlow's shades of blue by bits, the stand-ins grey."""
    import matplotlib

    order, efs = series_order(frame), list(_ef_columns(frame))
    base = {_label(s): lineup.color(s) for s in lineup.peers()}
    blues = matplotlib.colormaps["Blues"]
    ef = {s: blues(0.45 + 0.5 * i / max(1, len(efs) - 1)) for i, s in enumerate(efs)}
    stand = dict(zip(STAND_IN_SERIES.values(), ("#c7c7c7", "#a5a5a5")))
    return {s: base.get(s, ef.get(s, stand.get(s, "#bcbd22"))) for s in order}


NO_ROWS = "not run: no rows"


def _unrun_reason(unrun: pd.DataFrame, model: str, dataset: str, series: str) -> str:
    """Why `series` did not run for `model` (any model when '') on `dataset` (or on any)."""
    hit = unrun[((unrun["model"] == model) | (model == "")) & (unrun["series"] == series)]
    same = hit[hit["dataset"] == dataset]
    hit = same if len(same) else hit  # a system that cannot run here usually says so once per dataset
    if hit.empty:
        return NO_ROWS
    return hit["reason"].iloc[-1]


def _ratio_unrun(t: Tidy, baseline: str, bits: float) -> str:
    """Why a paper ratio (baseline / EdgeFlow at `bits`) has no measured line: the baseline's reason, or where the
    baseline was timed, EdgeFlow's at those bits (whose rows under other numerics are not EdgeFlow's)."""
    if not (t.ttft["series"] == _label(baseline)).any():
        return _unrun_reason(t.unrun, "", "", _label(baseline))
    ef = ef_series(bits)
    why = _unrun_reason(t.unrun, "", "", ef)
    return f"not run: no {ef} TTFT computed with the NPU's numerics" if why == NO_ROWS else why


def _tried(t: Tidy, series: str) -> bool:
    """Whether a TTFT of `series` was measured or attempted anywhere (else it is drawn as accuracy only)."""
    return bool((t.ttft_all["series"] == series).any() or (t.unrun["series"] == series).any())


def _short(text: str, n: int = 38) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _dataset_label(dataset: str, tokens: pd.DataFrame, model: str, bands: pd.DataFrame | None) -> str:
    """'lambada / 78–80 tok / paper 59–97': our prompt lengths, and Table 3's."""
    t = tokens[(tokens["model"] == model) & (tokens["dataset"] == dataset)]
    label = dataset + (f"\n{int(t['min'].iloc[0])}–{int(t['max'].iloc[0])} tok" if len(t) else "")
    p = bands[bands["dataset"] == dataset] if bands is not None else pd.DataFrame()
    if len(p):
        label += f"\npaper {int(p['prompt_tokens_min'].iloc[0])}–{int(p['prompt_tokens_max'].iloc[0])}"
    return label


def _select(frame: pd.DataFrame, cond: dict) -> pd.DataFrame:
    for k, v in cond.items():
        if v is not None and k in frame.columns:
            frame = frame[frame[k] == v]
    return frame


ACC_STYLE = {"proxy": ("-D", "black", "accuracy, local proxy tasks (right axis)"),
             "builtin": ("-o", "#2ca02c", "accuracy, lm-eval builtin tasks (right axis)")}


def _main_panel(ax, cond, t, order, colors, expected):
    """Bars: median TTFT per dataset and series (log) under one condition; lines: accuracy of the same model on a
    twin axis, one line per dataset source (proxy and builtin are never joined); 'not run' as text."""
    import matplotlib.transforms as mtransforms

    model = cond["model"]
    datasets = [d for d in DATASETS if d in expected["datasets"]] + sorted(expected["datasets"] - set(DATASETS))
    width = 0.84 / max(1, len(order))
    ttft = _select(t.ttft_all, cond)
    acc = t.accuracy[t.accuracy["model"] == model]
    ax2 = ax.twinx()
    text_tf = mtransforms.blended_transform_factory(ax.transData, ax.transAxes)
    labelled: set[str] = set()
    for i, dataset in enumerate(datasets):
        acc_xy: dict[str, tuple[list, list]] = {}
        acc_of = lambda series: acc[(acc["dataset"] == dataset) & (acc["series"] == series)]  # noqa: E731
        for j, series in enumerate(order):
            x = i - 0.42 + width * (j + 0.5)
            hit = ttft[(ttft["dataset"] == dataset) & (ttft["series"] == series)]
            if len(hit):
                m, lo, hi = hit[["median", "min", "max"]].iloc[0]
                ax.bar(x, m, width * 0.92, color=colors[series], edgecolor="black", linewidth=0.4,
                       label=None if series in labelled else series)
                labelled.add(series)
                ax.errorbar(x, m, yerr=[[m - lo], [hi - m]], color="black", capsize=1.5, linewidth=0.7)
            elif series in STAND_IN_SERIES.values() or not (_tried(t, series) or acc_of(series).empty):
                # accuracy only: a stand-in, or a series that no TTFT was asked of (e.g. CPU only, float outputs)
                ax.text(x, 0.02, _short(f"{series}: accuracy only", 48), transform=text_tf, rotation=90, fontsize=6,
                        ha="center", va="bottom", color="#555555")
            elif cond.get("device") is not None:
                reason = _short(_unrun_reason(t.unrun, model, dataset, series))
                ax.text(x, 0.02, reason, transform=text_tf, rotation=90, fontsize=6, ha="center", va="bottom",
                        color="#b00000")
            for a in acc_of(series).itertuples():
                xs, ys = acc_xy.setdefault(a.source, ([], []))
                xs.append(x)
                ys.append(100 * a.median)
        for source, (xs, ys) in acc_xy.items():
            style, color, label = ACC_STYLE.get(source, ("-s", "gray", f"accuracy, {source} (right axis)"))
            ax2.plot(xs, ys, style, color=color, markersize=3.5, linewidth=1,
                     label=None if label in labelled else label)
            labelled.add(label)
    ax.set_yscale("log")
    ax.set_ylabel("cold TTFT (s), log scale")
    ax.set_xticks(range(len(datasets)))
    bands = paper_values.load_paper("table3")
    ax.set_xticklabels([_dataset_label(d, t.prompt_tokens, model, bands) for d in datasets], fontsize=8)
    ax.set_xlim(-0.5, len(datasets) - 0.5)
    ax2.set_ylim(0, 100)
    ax2.set_ylabel("accuracy (%)")
    if ttft.empty:
        ax.set_ylim(0.1, 10)
    else:  # bars on a log axis start at its bottom: leave a decade below the fastest so ratios read as heights
        ax.set_ylim(10 ** math.floor(math.log10(ttft["min"].min()) - 0.5), ttft["max"].max() * 2.5)
    handles, names = ax.get_legend_handles_labels()
    h2, n2 = ax2.get_legend_handles_labels()
    if handles or h2:
        ax.legend(handles + h2, names + n2, fontsize=7, ncol=2, loc="upper left", framealpha=0.85)


def _ratio_panel(ax, cond, ours: pd.DataFrame, paper: pd.DataFrame | None, t, expected):
    """Grouped bars per baseline: our ratio (solid, with its bootstrap 95% interval) and the paper's (hatched) at each
    EdgeFlow bit-width, for one measurement condition."""
    import matplotlib

    model = cond["model"]
    ours = _select(ours, cond)
    pr = paper[paper["metric"] == "ttft_ratio"] if paper is not None else pd.DataFrame(columns=["system", "bits"])
    bits = sorted(set(ours["bits"]) | set(pr["bits"].dropna()))
    blues = matplotlib.colormaps["Blues"]
    width = 0.84 / max(1, 2 * len(bits))
    peers = lineup.peers()
    for i, base in enumerate(peers):
        k = 0
        for b in bits:
            color = blues(0.45 + 0.5 * bits.index(b) / max(1, len(bits) - 1))
            for source, frame in (("ours", ours), ("paper", pr)):
                hit = frame[(frame["system"] == base) & (frame["bits"] == b)]
                x = i - 0.42 + width * (k + 0.5)
                k += 1
                if hit.empty:
                    continue
                v = float(hit["ratio" if source == "ours" else "value"].iloc[0])
                ax.bar(x, v, width * 0.9, color=color if source == "ours" else "white", edgecolor=color,
                       hatch="////" if source == "paper" else None, linewidth=1.2)
                top = v
                if source == "ours" and np.isfinite(hit["lo"].iloc[0]):
                    lo, hi = float(hit["lo"].iloc[0]), float(hit["hi"].iloc[0])
                    ax.errorbar(x, v, yerr=[[v - lo], [hi - v]], color="black", capsize=1.5, linewidth=0.7)
                    top = hi
                ax.text(x, top, f"{v:.2f}", ha="center", va="bottom", fontsize=5.5, rotation=90)
        if ours[ours["system"] == base].empty:
            series = _label(base)
            measured = set(_select(t.ttft, cond)["series"])
            if series in t.different_work:
                reason = t.different_work[series]
            elif series in measured:
                reason = "no EdgeFlow TTFT on the same datasets"
            elif series in expected["series"]:
                reason = _unrun_reason(t.unrun, model, "", series)
            else:
                reason = "not in the sweep"
            ax.text(i, 0.97, "\n".join(textwrap.wrap("ours: " + reason, 24)[:3]), ha="center", va="top",
                    fontsize=6, color="#b00000", transform=ax.get_xaxis_transform())
    ax.axhline(1, color="black", linewidth=0.6, linestyle=":")
    ax.set_xticks(range(len(peers)))
    ax.set_xticklabels([_label(b) for b in peers], fontsize=8)
    ax.set_ylabel("TTFT ratio: baseline / EdgeFlow (×)")
    from matplotlib.patches import Patch

    handles = [Patch(facecolor=blues(0.45 + 0.5 * bits.index(b) / max(1, len(bits) - 1)), label=f"ours, EF {b:g}b")
               for b in bits if b in set(ours["bits"])]
    handles += [Patch(facecolor="white", edgecolor="gray", hatch="////", label="paper (section 5.2)")]
    ax.legend(handles=handles, fontsize=6.5, loc="upper center", bbox_to_anchor=(0.5, -0.09), ncol=3, frameon=False)
    ax.set_title("speedup vs baselines: ours (95% bootstrap interval) beside the paper's\n(paper: over its models and "
                 "datasets)", fontsize=9)
    tops = [*ours["ratio"], *ours["hi"].dropna(), *pr["value"]]
    ax.set_ylim(0, max([1.5, *tops]) * 1.4)


def panels(t: Tidy, series_rows: pd.DataFrame) -> list[dict]:
    """One figure row per TTFT measurement condition (model, device, flash, prompt source); a model with accuracy rows
    but no TTFT gets a row of its own."""
    out = [cond for cond, _ in _conditions(t.ttft_all, TTFT_CONDITION)]
    timed = {c["model"] for c in out}
    models = set(t.accuracy["model"]) | set(series_rows["model"].dropna())
    out += [{"model": m, "device": None, "flash": None, "source": None} for m in sorted(models - timed)]
    return out or [{"model": "(no model)", "device": None, "flash": None, "source": None}]


def draw(rows: pd.DataFrame, paper: pd.DataFrame | None, figures_dir: Path, name: str = NAME,
         t: Tidy | None = None, ours: pd.DataFrame | None = None) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = t or tidy(rows)
    ours = ratios(t.ttft, t.ttft_rows) if ours is None else ours
    series_rows = selection.with_conditions(_with_series(selection.current(rows)))
    conds = panels(t, series_rows)
    colors = series_colors(series_rows)
    fig, axes = plt.subplots(len(conds), 2, figsize=(16, 4.6 * len(conds)), squeeze=False,
                             gridspec_kw={"width_ratios": [3.2, 1.3]})
    for r, cond in enumerate(conds):
        per = _select(series_rows, {k: v for k, v in cond.items() if k == "model"})
        timed = _select(per, cond) if cond.get("device") is not None else per
        expected = {"datasets": set(per["dataset"].dropna()), "series": set(per["series"])}
        _main_panel(axes[r][0], cond, t, series_order(per), colors, expected)
        where = selection.condition_text(**{k: v for k, v in cond.items() if k != "source"})
        if cond.get("source") is not None:
            where += " · TTFT prompts: " + ("local corpus text" if cond["source"] == "proxy" else "the datasets'")
        tag = "; ".join(x for x in selection.labels(timed) if not x.startswith(("device:", "flash")))
        axes[r][0].set_title(f"{where}" + (f"\n{tag}" if tag else ""), fontsize=8.5)
        _ratio_panel(axes[r][1], cond, ours, paper, t, expected)
    fig.suptitle("Figure 10 (ours): cold-start TTFT (bars: median, error bars min–max over prompts and repetitions) "
                 "and accuracy (line); red text: configurations that did not run", fontsize=10)
    fig.tight_layout()
    return output.save_figure(fig, name, figures_dir)


# --- report -----------------------------------------------------------------------------------------------------------------

def _cell(row) -> str:
    return f"{fmt(row['median'])} [{fmt(row['min'])}–{fmt(row['max'])}] n={int(row['n'])}"


def _acc_cell(row) -> str:
    """Accuracy with its Wilson 95% interval over the row's items."""
    items = row.get("items")
    if items is None or pd.isna(items):
        return f"{fmt(row['median'])} (items unknown)"
    lo, hi = stats.wilson(row["median"] * items, int(items))
    return f"{fmt(row['median'])} [{fmt(lo)}–{fmt(hi)}] of {int(items)}"


def _where(cond: dict) -> str:
    return selection.condition_text(**cond)


class _Caps:
    """The cap reasons of each comparison (rules.cap_reasons over its condition's rows), remembered per condition for
    the note above the tables."""

    def __init__(self):
        self.seen: dict[str, list[str]] = {}

    def __call__(self, cond: dict, frame: pd.DataFrame, device: bool) -> list[str]:
        reasons = rules.cap_reasons(_select(frame, cond), PAPER_MODELS, device_matters=device)
        if reasons:
            self.seen[_where(cond)] = reasons
        return reasons


def _paper_metric(paper: pd.DataFrame | None, metric: str) -> pd.DataFrame:
    return paper[paper["metric"] == metric] if paper is not None else pd.DataFrame(columns=["bits", "value"])


def ratio_lines(paper: pd.DataFrame | None, ours: pd.DataFrame, t: Tidy, caps: _Caps) -> list[dict]:
    """One line per paper TTFT ratio (baseline / EdgeFlow at a bit width) and condition we measured it under, with its
    verdict; a ratio we did not measure is a line saying why."""
    lines = []
    for p in _paper_metric(paper, "ttft_ratio").itertuples():
        hit = ours[(ours["system"] == p.system) & (ours["bits"] == p.bits)]
        if hit.empty:
            why = _ratio_unrun(t, p.system, p.bits)
            lines.append({"condition": "–", "baseline": _label(p.system), f"{EF} bits": f"{p.bits:g}",
                          "ours [95%]": why, "paper": f"{p.value:.2f}", "datasets × prompts": "–", "interval": "–",
                          "verdict": rules.NOT_RUN, "before the cap": rules.NOT_RUN, "_caps": [why]})
        for h in hit.itertuples():
            cond = {k: getattr(h, k) for k in TTFT_CONDITION}
            prompts = None if pd.isna(h.prompts) else int(h.prompts)
            shape = f"{h.datasets} × {'?' if prompts is None else prompts}"
            args = dict(interval=(h.lo, h.hi), datasets=h.datasets, prompts=prompts)
            capped = caps(cond, t.ttft_rows, True)
            lines.append({"condition": _where(cond), "baseline": _label(p.system), f"{EF} bits": f"{p.bits:g}",
                          "_caps": capped, "ours [95%]": output.interval_text(h.ratio, h.lo, h.hi),
                          "paper": f"{p.value:.2f}", "datasets × prompts": shape,
                          "interval": h.method, "verdict": rules.ratio_verdict(h.ratio, p.value, caps=capped, **args),
                          "before the cap": rules.ratio_verdict(h.ratio, p.value, **args)})
    return lines


def drop_lines(paper: pd.DataFrame | None, t: Tidy, acc_rows: pd.DataFrame, caps: _Caps) -> list[dict]:
    """One line per paper accuracy drop (EdgeFlow at a bit width vs the baselines) and condition, judged in both
    readings of the paper's "%" (rules.percent_verdict)."""
    drops, lines = accuracy_drops(t.accuracy), []
    for p in _paper_metric(paper, "accuracy_drop_pct").itertuples():
        for h in drops[drops["bits"] == p.bits].itertuples():
            cond = {k: getattr(h, k) for k in ACC_CONDITION}
            capped = caps(cond, acc_rows, False) + (["the baselines' accuracy comes from fake-quant stand-ins"]
                                                    if h.versus.startswith("stand-ins") else [])
            args = dict(interval=(h.lo, h.hi))
            lines.append({"condition": _where(cond), f"{EF} bits": f"{p.bits:g}", "versus": h.versus,
                          "_caps": capped, "ours (pp) [95%]": output.interval_text(h.drop_pp, h.lo, h.hi),
                          "paper": rules.percent_text(p.value, h.reference), "datasets": h.datasets,
                          "verdict": rules.percent_verdict(h.drop_pp, p.value, h.reference, caps=capped, **args),
                          "before the cap": rules.percent_verdict(h.drop_pp, p.value, h.reference, **args)})
    return lines


LLMNPU_TTFT = "llm.npu+ / EF 5b TTFT on MMLU and HellaSwag"
LLMNPU_GAIN = "largest accuracy gain over llm.npu+"


def _llmnpu_line(h: dict, stated: dict, t: Tidy, acc_rows: pd.DataFrame, caps: _Caps) -> dict | None:
    """The line of one of our llm.npu+ numbers (llmnpu_statements) beside the paper's statement, None when the paper
    states none."""
    if h["metric"] == "ttft_ratio_long" and "ttft_ratio_min" in stated:
        cond = {k: h[k] for k in TTFT_CONDITION}
        lo, hi = stated["ttft_ratio_min"], stated["ttft_ratio_max"]
        # the statement covers two datasets: both are needed, plus MIN_PROMPTS prompts each
        args = dict(interval=(h["lo"], h["hi"]), datasets=h["datasets"], prompts=h["prompts"],
                    min_datasets=len(LONG_PROMPTS))
        capped = caps(cond, t.ttft_rows, True)
        return {"condition": _where(cond), "statement": LLMNPU_TTFT,
                "ours": f"{h['min']:.2f}–{h['max']:.2f}×; geometric mean "
                        + output.interval_text(h["value"], h["lo"], h["hi"]),
                "paper": f"{lo:.2f}–{hi:.2f}× (midpoint compared)",
                "verdict": rules.ratio_verdict(h["value"], (lo + hi) / 2, caps=capped, **args),
                "before the cap": rules.ratio_verdict(h["value"], (lo + hi) / 2, **args), "_caps": capped}
    if h["metric"] == "accuracy_gain_max" and "accuracy_gain_pct_max" in stated:
        cond = {k: h[k] for k in ACC_CONDITION}
        said, reference, args = stated["accuracy_gain_pct_max"], h["reference"], dict(interval=(h["lo"], h["hi"]))
        capped = caps(cond, acc_rows, False)
        return {"condition": _where(cond), "statement": f"{LLMNPU_GAIN} (max over bits of the mean over datasets)",
                "ours": output.interval_text(h["value"], h["lo"], h["hi"], unit=" pp"),
                "paper": rules.percent_text(said, reference),
                "verdict": rules.percent_verdict(h["value"], said, reference, caps=capped, **args),
                "before the cap": rules.percent_verdict(h["value"], said, reference, **args), "_caps": capped}
    return None


def llmnpu_lines(paper: pd.DataFrame | None, t: Tidy, acc_rows: pd.DataFrame, caps: _Caps) -> list[dict]:
    """The paper's two llm.npu+ statements of section 5.2, each a line, measured or not: one not measured says why
    (never silently dropped)."""
    if paper is None:
        return []
    stated = dict(zip(paper["metric"], paper["value"]))
    lines = [line for h in llmnpu_statements(t) if (line := _llmnpu_line(h, stated, t, acc_rows, caps))]
    statements = {"ttft_ratio_min": (LLMNPU_TTFT, "ttft_ratio_max", "×"),
                  "accuracy_gain_pct_max": (LLMNPU_GAIN, None, "%")}
    for metric, (what, upper, unit) in statements.items():
        if metric not in stated or any(line["statement"].startswith(what) for line in lines):
            continue
        # its rows may be drawn, but a ratio of different work would say nothing
        npu = _peer_series()
        why = ("not run: no system here plays the paper's llm.npu+" if npu is None
               else f"not run: {t.different_work[npu]}" if npu in t.different_work
               else _unrun_reason(t.unrun, "", "", npu))
        said = f"{stated[metric]:.2f}" + (f"–{stated[upper]:.2f}" if upper in stated else "") + unit
        lines.append({"condition": "", "statement": what, "ours": why, "paper": said,
                      "verdict": rules.NOT_RUN, "before the cap": rules.NOT_RUN, "_caps": [why]})
    return lines


def _comparison_tables(ratio: list[dict], drop: list[dict], npu: list[dict]) -> list[str]:
    body = ["**TTFT ratios** (baseline / EdgeFlow; ours: geometric mean over the datasets where both ran, on the "
            "prompts both timed, with its 95% interval: a bootstrap over prompts and repetitions with "
            f"{stats.BOOTSTRAP_MIN_PROMPTS} or more common prompts per dataset, else a t-interval of per-prompt log "
            "ratios). The paper's ratios summarise its Figure 10 over Llama3-8B and Phi3-3.8B and five datasets.\n",
            md_table(pd.DataFrame(ratio)) if ratio else "_(no paper ratios loaded)_\n"]
    if drop:
        body += ["\n**Accuracy drop** of EdgeFlow vs the mean of the baselines (ours in percentage points, averaged "
                 "over datasets, with the 95% interval from each accuracy's Wilson interval):\n",
                 md_table(pd.DataFrame(drop))]
    if npu:
        body += ["\n**llm.npu+ statements** of section 5.2:\n", md_table(pd.DataFrame(npu))]
    return body


def _measurement_tables(t: Tidy, series_rows: pd.DataFrame) -> list[str]:
    """Our numbers behind the comparisons, and what makes them comparable (the same work, MNN's start-up, quality
    against FP16, the runtime's agreement with its reference), then what did not run."""
    body = []
    for metric, unit, keys, cell in (("ttft", "s; median [min–max] over prompts and repetitions, n rows",
                                      TTFT_CONDITION, _cell),
                                     ("accuracy", "fraction; [Wilson 95% interval] of the items evaluated",
                                      ACC_CONDITION, _acc_cell)):
        s = getattr(t, metric)
        if s.empty:
            continue
        s = s.assign(cell=[cell(r) for _, r in s.iterrows()])
        wide = s.pivot_table(index=[*keys, "dataset"], columns="series", values="cell", aggfunc="first")
        wide = wide[[c for c in series_order(s) if c in wide.columns]].reset_index()
        body += [f"\n**Our {metric}** ({unit}):\n", md_table(wide)]
    tables = (
        (work_table, "**The same work** for every system (spawn to first token, cold, the same prompt text and "
                     "context):"),
        (startup_table, "A start-up the harness adds to a system's TTFT (MNN: its Python interpreter's start and "
                        "`import MNN`; its wheel is the only MNN engine reachable here), and its ratio without it, "
                        "each run minus its own (the interpreter's start, before the driver's first line, is not "
                        "measured and stays in):"),
        (quality_table, "**Quality against the FP16 model** on held-out text (not calibration text): mean KL(FP16 || ·) "
                        "in nats/token and the share of positions with the same top-1 token, [95% interval over "
                        "windows]. \"by the engine\": the engine's own forward pass over the weights its TTFT loads; "
                        "\"fake-quant\": the Python model of the same weights, with static, per-token dynamic or float "
                        "activations:"),
        (agreement_table, "**EdgeFlow's accuracy is its runtime's** (the packed file its TTFT reads); agreement with "
                          "the fake-quant reference over the same requests:"))
    for table, caption in tables:
        df = table(series_rows)
        if len(df):
            body += [f"\n{caption}\n", md_table(df)]
    if not t.unrun.empty:
        u = t.unrun.groupby(["series", "reason"]).size().reset_index(name="configurations")
        body += ["\n**Did not run:**\n", md_table(u)]
    return body


def _scoreboard(ratio: list[dict], drop: list[dict], npu: list[dict]) -> list[rules.Claim]:
    """The abstract's headline numbers first: TTFT at EdgeFlow's default 5 bits, llm.npu+'s range, every accuracy
    statement."""
    return (rules.claims(NAME, ratio, lambda line: f"TTFT ratio {line['baseline']} / {EF} {line[f'{EF} bits']}b"
                         f" ({line['condition']})", ours="ours [95%]", headline=lambda line: line[f"{EF} bits"] == "5")
            + rules.claims(NAME, drop, lambda line: f"accuracy drop of {EF} {line[f'{EF} bits']}b vs the baselines "
                           f"({line['condition']})", ours="ours (pp) [95%]", headline=lambda line: True)
            + rules.claims(NAME, npu, lambda line: f"{line['statement']} ({line['condition'] or '–'})",
                           headline=lambda line: True))


def render(rows: pd.DataFrame, paper: pd.DataFrame | None, figures_dir: Path) -> Section:
    rows = selection.current(rows)
    if rows.empty:
        return output.not_run_section(NAME, TITLE, "no rows in the store")
    t = tidy(rows)
    ours = ratios(t.ttft, t.ttft_rows)
    figures = draw(rows, paper, figures_dir, t=t, ours=ours)
    series_rows = selection.with_conditions(_with_series(rows))
    acc_rows = selection.ok_rows(series_rows, "accuracy")
    acc_rows = acc_rows[acc_rows["ef_bits"].notna() | (acc_rows["system"] != lineup.proposed())]  # what verdicts read
    caps = _Caps()
    ratio, drop, npu = (ratio_lines(paper, ours, t, caps), drop_lines(paper, t, acc_rows, caps),
                        llmnpu_lines(paper, t, acc_rows, caps))
    verdict, count = rules.overall([line["verdict"] for line in ratio + drop + npu])
    summary = "no baseline/EdgeFlow pair measured on the same model and dataset" if verdict == rules.NOT_RUN else count
    tags = selection.labels(rows)
    note = selection.models_differ_note(set(t.ttft["model"]) | set(t.accuracy["model"]), PAPER_MODELS)
    spans = selection.spans_note(series_rows[series_rows["metric"] == "ttft_s"], tuple(TTFT_CONDITION))
    body = [f"![{TITLE}](figures/{figures[0].name})\n", "Labels: " + "; ".join(tags) + ".\n" if tags else "",
            f"{note}\n" if note else "", f"{spans}\n" if spans else "", output.caps_note(caps.seen),
            *_comparison_tables(ratio, drop, npu), *_measurement_tables(t, series_rows)]
    return Section(NAME, TITLE, verdict, summary, "\n".join(b for b in body if b), figures,
                   claims=_scoreboard(ratio, drop, npu))


# Fidelity rows (experiment=fidelity) -> columns of the quality table. "_runtime": computed by the engine the row
# names (EdgeFlow's runtime, llama.cpp, MNN); the others: EdgeFlow's and the stand-ins' fake-quant models, which
# locate the error (static activation scales as the runtime computes, per-token dynamic scales, float activations).
QUALITY = {"kl_fp16_runtime": "KL by the engine", "top1_agreement_runtime": "same top-1 (engine)",
           "kl_fp16": "KL fake-quant", "kl_fp16_float_outputs": "KL CPU only (float outputs)",
           "kl_fp16_dynamic": "KL fake-quant, dynamic act.", "kl_fp16_weight_only": "KL fake-quant, weights only"}


def quality_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Per model, text and series: mean KL(FP16 || series) and top-1 agreement over the text's windows, each with
    its 95% t-interval over windows (harness/eval/fidelity.py); two texts are never pooled."""
    from harness.eval.intervals import mean_ci95

    q = rows[(rows["status"] == "ok") & rows["metric"].isin(list(QUALITY)) & rows["value"].notna()]
    # a stand-in names no engine: its fidelity run's "_runtime" rows are our runtime over its weights, not shown here
    q = q[q["system"].notna() | ~q["metric"].str.endswith("_runtime")]
    if q.empty:
        return pd.DataFrame()
    out = []
    q = q if "dataset" in q.columns else q.assign(dataset="")
    for (model, text, series), g in q.groupby(["model", "dataset", "series"], dropna=False):
        line = {"model": model, "text": text, "series": series}
        for metric, column in QUALITY.items():
            values = list(g.loc[g["metric"] == metric, "value"])
            mean, half = mean_ci95(values) if values else (math.nan, math.nan)
            line[column] = output.interval_text(mean, mean - half, mean + half) if values else "–"
        line["windows"] = int(g.groupby("metric").size().max())
        out.append(line)
    order = {name: i for i, name in enumerate(series_order(q))}
    return pd.DataFrame(sorted(out, key=lambda line: (line["model"], str(line["text"]), order[line["series"]])))


AGREEMENT = {"agreement_top1": "top-1 agreement (scored tokens)",
             "agreement_max_abs_loglik": "max abs. difference of log-likelihoods (nats)",
             "agreement_mean_abs_loglik": "mean abs. difference of log-likelihoods (nats)"}


def agreement_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Per model, dataset and EdgeFlow series: the runtime-vs-fake-quant agreement rows of its accuracy runs."""
    a = rows[(rows["status"] == "ok") & rows["metric"].isin(list(AGREEMENT))]
    if a.empty:
        return pd.DataFrame()
    wide = a.pivot_table(index=["model", "dataset", "series"], columns="metric", values="value", aggfunc="median")
    return wide.rename(columns=AGREEMENT).map(lambda v: fmt(v)).reset_index()


@register_artifact
class Fig10(SweepArtifact):
    NAME, TITLE, EXPERIMENTS = NAME, TITLE, EXPERIMENTS
    sweep, render = staticmethod(sweep), staticmethod(render)
