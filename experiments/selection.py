"""Which of our rows count and under which conditions they were measured: the latest successful attempt of each
configuration, conditions never pooled (model, device, flash emulation, dataset source), the systems' labels, and the
labels a reader must see beside a number (emulated, simulated, stand-in, proxy, the code version)."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd

from harness.data.prompts import CORPUS_PROMPT_LABEL
from harness.runner.store import RUNTIME_EVALUATED
from experiments.paper_values import PAPER_SOCS


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
