"""The results store: one long-format row per measurement, appended atomically to a Parquet dataset.

Layout: `results/runs/<experiment>/part-<time>-<pid>-<rand>.parquet`, one file per appended batch. A batch is written
to a hidden temporary file in the same folder and renamed into place, so a process killed mid-write leaves at most a
hidden `.tmp-*` file that readers ignore: nothing already stored is ever rewritten or lost.
"""
from __future__ import annotations

import functools
import os
import secrets
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

# Every row has these columns (one row per measurement). `label` says what kind of number `value` is, from one closed
# vocabulary (LABELS); the paper's values are not rows here (results/paper/).
COLUMNS: dict[str, pa.DataType] = {
    "experiment": pa.string(), "system": pa.string(), "model": pa.string(), "quantizer": pa.string(),
    "bits": pa.float64(), "packing": pa.string(), "pipeline": pa.string(), "dataset": pa.string(),
    "prompt_tokens": pa.int64(), "device": pa.string(), "metric": pa.string(), "value": pa.float64(),
    "unit": pa.string(), "repetition": pa.int64(), "status": pa.string(), "label": pa.string(),
    "error": pa.string(), "notes": pa.string(), "flash_emulated_mbps": pa.float64(),
    "config_hash": pa.string(), "git_commit": pa.string(), "host": pa.string(), "device_info": pa.string(),
    "time": pa.string(),
    # the work a timing row measured (harness/measure/workload.py: prompt, ctx, threads, timed event, cold state)
    "workload": pa.string(),
    # what else tells a benchmark's rows apart inside one configuration (e.g. the unpack kernel: avx2, sse, native)
    "variant": pa.string(),
    # what the statistics need (experiments/stats.py), as columns: the items an accuracy is over (its Wilson
    # interval), which prompt of the set a timing row timed (prompts pair across engines) and where it came from
    # (harness/data/prompts.py: the paper's dataset, or text cut from the local corpus)
    "items": pa.int64(), "prompt_index": pa.int64(), "prompt_source": pa.string(),
    # lm-eval's standard error of an accuracy (its bootstrap or analytic one; null where lm-eval gives none)
    "stderr": pa.float64(),
    # where a quality number's data came from, whatever computed it: "proxy" (a local stand-in for the paper's dataset
    # or text, harness/data/) or "builtin" (the paper's); null on rows without data (sizes, timings: prompt_source)
    "data_source": pa.string(),
    # what arithmetic computed a quantized model's number (a quality row, or a timing of the engine that computes it):
    # "npu" (harness/quant/outputs.py NPU_NUMERICS: static A8/A16 inputs, INT8 weights, outputs requantized to the artifact's static grids: what QNN
    # HTP computes, docs/npu.md) or how it differs ("float outputs", "dynamic activations", "float activations");
    # null for FP16 and for engines that have no accelerator half
    "numerics": pa.string(),
    # where an engine's accelerator half ran on a timing row (harness/systems/base.py Prepared.columns): "cpu threads"
    # (our runtime on every device so far) or "npu"; null for an engine without one
    "accelerator": pa.string(),
    # the host's 1-minute load average when a benchmark row was measured (harness/bench/record.py): how noisy it was
    "load_avg_1m": pa.float64(),
    # a timeline's sample (metrics rss_mib, pss_mib, power_w: harness/systems/base.py Timeline): seconds from spawn
    "at_s": pa.float64(),
    # the NPU experiments' rows (harness/runner/npu_kinds.py; soc also on quality rows HTP's simulator computed, the
    # *_htp ones and those of a run with an npu group): the SoC the graphs were compiled for ("sm8750"), which
    # split of a layer the NPU runs ("edgeflow": its seven matmuls; "llmnpu": llm.npu's coarse graphs), the decoder
    # layer (null: the whole model, whose `variant` says "all layers" (summed) or "one graph") and a matmul stage
    "soc": pa.string(), "npu_split": pa.string(), "layer": pa.int64(), "stage": pa.string(),
}
SCHEMA = pa.schema(list(COLUMNS.items()))
OK, FAILED, NOT_RUN = "ok", "failed", "not run"
LABELS = {
    "measured": "measured on the device the row names, as it is",
    "emulated": "measured under emulation (flash reads throttled to a phone's rate)",
    "simulated": "computed by a simulator, not measured on a device (the pipeline simulator, harness/pipeline_sim.py; "
                 "QNN's HTP simulator, harness/npu/)",
    "proxy": "measured on a local stand-in dataset (the paper's needs the hub)",
    "stand-in": "computed by a model standing in for what the row names: the fake-quant torch model (a quantizer's "
                "integer grid in float arithmetic) in place of an integer engine, or the loopback phone's scripted "
                "sensors; the data_source column says whether its data was a local proxy",
    "not run": "no value: the row's error or notes say why",
}


def check_labels(rows: list[dict]) -> None:
    """A row's label must be one of LABELS and agree with what the row is: a row without a successful value is
    'not run', and a value that is there is not."""
    for r in rows:
        label, status = r.get("label"), r.get("status", OK)
        if label not in LABELS:
            raise ValueError(f"row {r.get('metric')!r}: label {label!r} is not one of {list(LABELS)}")
        if status in (FAILED, NOT_RUN) and label != NOT_RUN:
            raise ValueError(f"row {r.get('metric')!r}: status {status!r} needs label 'not run', not {label!r}")
        if status == OK and label == NOT_RUN:
            raise ValueError(f"row {r.get('metric')!r}: label 'not run' on a row whose status is ok")


# The pipeline simulator's rows (metrics sim_*), labelled "emulated" before the "simulated" label existed.
SIMULATED_METRIC = "sim_"
# The `variant` of quality rows that our runtime computed for a quantizer with no system named
# (experiment.extra.evaluator=runtime, harness/runner/kinds.py): experiments tell them from the fake-quant model's by it
RUNTIME_EVALUATED = "scored by our runtime"
# Before data_source was a column, the label said "proxy"; the fake-quant model's quality rows (no system, a quantizer
# other than fp16, not the HTP simulator's) were labelled measured or proxy before they were labelled stand-in.
QUALITY_METRICS = ("accuracy", "acc_norm", "perplexity", "word_perplexity", "window_nll",
                   "kl_fp16", "top1_agreement", "kl_fp16_dynamic", "top1_agreement_dynamic", "kl_fp16_weight_only",
                   "top1_agreement_weight_only")
# Before items / prompt_index / prompt_source were columns, the notes said them: "..., n=100, shots=0" on accuracy
# rows (harness/runner/kinds.py) and "prompt 3 (corpus text (local, Shakespeare corpus)); ..." on timing rows.
_OLD_ITEMS = r"\bn=(\d+)"
_OLD_PROMPT = r"\bprompt (\d+) \(((?:[^()]|\([^()]*\))*)\)"
# ... and benchmark rows said their load average in the notes: "...; load average 0.42"
_OLD_LOAD = r"\bload average ([\d.]+)"
_OLD_STDERR = r"\bstderr=([-+.\deE]+|None)"  # accuracy rows: lm-eval's standard error in the notes
# how the NPU experiments' rows named SoC, split, layer and stage in `variant` before they had columns
_OLD_NPU_VARIANT = (r"^(?P<soc>\S+)(?P<llmnpu> llm\.npu)? "
                    r"(?:layer (?P<layer>\d+)(?: (?P<stage>\S+))?|(?P<scope>all layers|one graph))$")
NPU_EXPERIMENTS = ("npu_compile", "npu_oracle", "npu_profile")
# ... and a run's memory and power samples were JSON in its summary row's notes before they were rows of their own
# (harness/systems/base.py Timeline: one row per sample, `at_s` its time): summary metric -> (sample metric, unit, how)
_OLD_TIMELINES = {"peak_rss_mb": ("rss_mib", "MiB", r"rss timeline \(s, MiB\): (\[\[.*?\]\])"),
                  "peak_pss_mb": ("pss_mib", "MiB", r"pss timeline \(s, MiB\): (\[\[.*?\]\])"),
                  "energy_j": ("power_w", "W", r"power timeline \(s, W\): (\[\[.*?\]\])")}


def migrate(df: pd.DataFrame) -> pd.DataFrame:
    """Rows of older stores in today's vocabulary and columns (one way; the files are not rewritten)."""
    old_sim = (df["label"] == "emulated") & df["metric"].fillna("").str.startswith(SIMULATED_METRIC)
    if old_sim.any():
        df.loc[old_sim, "label"] = "simulated"
    unsourced = df["data_source"].isna() & (df["label"] == "proxy")
    if unsourced.any():
        df.loc[unsourced, "data_source"] = "proxy"
    fake_quant = (df["system"].isna() & df["quantizer"].notna() & (df["quantizer"] != "fp16")
                  & df["metric"].isin(QUALITY_METRICS) & df["label"].isin(["measured", "proxy"])
                  & (df["variant"] != RUNTIME_EVALUATED))
    if fake_quant.any():
        df.loc[fake_quant, "label"] = "stand-in"
    notes = df["notes"].fillna("").astype(str)
    old = df["items"].isna() & (df["metric"] == "accuracy")
    if old.any():
        df.loc[old, "items"] = pd.to_numeric(notes[old].str.extract(_OLD_ITEMS)[0]).to_numpy(float)
    unerred = df["stderr"].isna() & notes.str.contains("stderr=", regex=False)
    if unerred.any():  # accuracy rows said lm-eval's stderr in their notes before it had a column
        df.loc[unerred, "stderr"] = pd.to_numeric(notes[unerred].str.extract(_OLD_STDERR)[0],
                                                  errors="coerce").to_numpy(float)
    unloaded = df["load_avg_1m"].isna() & notes.str.contains("load average ", regex=False)
    if unloaded.any():
        df.loc[unloaded, "load_avg_1m"] = pd.to_numeric(notes[unloaded].str.extract(_OLD_LOAD)[0]).to_numpy(float)
    # the pipeline simulator's rows replayed a corpus prompt (harness/data/prompts.py) before they said so
    unsourced_sim = df["prompt_source"].isna() & (df["label"] == "simulated") & df["metric"].fillna("").str.startswith(
        SIMULATED_METRIC)
    if unsourced_sim.any():
        from harness.data.prompts import CORPUS_PROMPT_LABEL

        df.loc[unsourced_sim, "prompt_source"] = CORPUS_PROMPT_LABEL
    old_npu = df["soc"].isna() & df["experiment"].isin(NPU_EXPERIMENTS) & df["variant"].notna()
    if old_npu.any():
        parts = df.loc[old_npu, "variant"].str.extract(_OLD_NPU_VARIANT).dropna(subset=["soc"])
        df.loc[parts.index, "soc"] = parts["soc"]
        df.loc[parts.index, "npu_split"] = parts["llmnpu"].notna().map({True: "llmnpu", False: "edgeflow"})
        df.loc[parts.index, "layer"] = pd.to_numeric(parts["layer"]).to_numpy(float)
        df.loc[parts.index, "stage"] = parts["stage"]
        df.loc[parts.index, "variant"] = parts["scope"]
    unindexed = df["prompt_index"].isna()
    found = notes[unindexed].str.extract(_OLD_PROMPT).dropna(subset=[0])  # only rows without the column's value
    if len(found):
        df.loc[found.index, "prompt_index"] = found[0].astype(float).to_numpy()
        df.loc[found.index, "prompt_source"] = found[1]
    samples = _old_timeline_rows(df, notes)
    return pd.concat([df, samples], ignore_index=True) if len(samples) else df


def _old_timeline_rows(df: pd.DataFrame, notes: pd.Series) -> pd.DataFrame:
    """One row per sample that an older summary row kept in its notes (_OLD_TIMELINES), where its run has no sample
    rows of that metric; the summary row's other columns, no notes."""
    import json

    new = []
    for summary, (metric, unit, pattern) in _OLD_TIMELINES.items():
        found = notes[df["metric"] == summary].str.extract(pattern)[0].dropna()
        if found.empty:
            continue
        sampled = df.loc[df["metric"] == metric, ["config_hash", "repetition"]]
        have = set(zip(sampled["config_hash"], sampled["repetition"]))
        for i, text in found.items():
            row = df.loc[i].to_dict()
            if (row["config_hash"], row["repetition"]) not in have:
                new += [{**row, "metric": metric, "unit": unit, "value": float(v), "at_s": float(t), "notes": None}
                        for t, v in json.loads(text)]
    return pd.DataFrame(new, columns=df.columns).astype(df.dtypes.to_dict()) if new else df[:0]


def default_root() -> Path:
    return Path(os.environ.get("EDGEFLOW_RESULTS", Path(__file__).resolve().parents[2] / "results" / "runs"))


class ResultsStore:
    def __init__(self, root: str | os.PathLike | None = None):
        self.root = Path(root) if root else default_root()

    def append(self, experiment: str, rows: list[dict]) -> Path | None:
        """Write `rows` as one new part file; unknown keys are an error, missing ones are null."""
        if not rows:
            return None
        unknown = {k for r in rows for k in r} - COLUMNS.keys()
        if unknown:
            raise KeyError(f"result rows have unknown columns {sorted(unknown)}; known: {list(COLUMNS)}")
        check_labels(rows)
        table = pa.Table.from_pylist([{**r, "experiment": experiment} for r in rows], schema=SCHEMA)
        folder = self.root / experiment
        folder.mkdir(parents=True, exist_ok=True)
        # Names sort in append order (nanosecond clock first), which `completed` relies on.
        name = f"part-{time.time_ns():020d}-{os.getpid()}-{secrets.token_hex(4)}.parquet"
        tmp = folder / f".tmp-{name}"
        pq.write_table(table, tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, folder / name)
        return folder / name

    def read(self, experiment: str | None = None, with_part: bool = False) -> pd.DataFrame:
        """All rows (of one experiment, or of all); an empty frame with the schema's columns when there are none.
        `with_part` adds a `part` column naming each row's part file: one part is one attempt of one configuration
        (run_job appends a job's rows, its failure row included, as one batch), which is how readers tell a rerun's
        rows from an earlier attempt's."""
        folders = [self.root / experiment] if experiment else sorted(p for p in self.root.glob("*") if p.is_dir())
        parts = [p for f in folders for p in _parts(f)]
        if not parts:
            empty = SCHEMA.empty_table().to_pandas()
            return empty.assign(part=pd.Series(dtype="string")) if with_part else empty
        frames = [pq.read_table(p, schema=SCHEMA).to_pandas() for p in parts]
        if with_part:
            frames = [f.assign(part=f"{p.parent.name}/{p.name}") for f, p in zip(frames, parts)]
        return migrate(pd.concat(frames, ignore_index=True))

    def completed(self, experiment: str) -> set[str]:
        """Config hashes whose latest attempt succeeded: a resumed sweep skips them. A configuration whose latest
        attempt failed or was not run is retried: a "not run" is decided before any measurement, so retrying costs
        little, and its reason may have gone (a phone attached, the hub reachable, an engine that learnt to score).
        Every job asks before it runs, so each part's outcomes are read once per process (parts never change)."""
        latest: dict[str, str] = {}
        for part in _parts(self.root / experiment):  # rows too are in append order
            latest.update(_outcomes(str(part)))
        return {config_hash for config_hash, status in latest.items() if status == OK}


def _parts(folder: Path) -> list[Path]:
    """An experiment folder's part files in append order (their names sort so; none if the folder is missing)."""
    return sorted(folder.glob("part-*.parquet"))


@functools.lru_cache(maxsize=None)
def _outcomes(part: str) -> dict[str, str]:
    """{config hash: status of its last row} in one part file (two columns read, not the whole batch)."""
    table = pq.read_table(part, columns=["config_hash", "status"]).to_pydict()
    return {h: s for h, s in zip(table["config_hash"], table["status"]) if h is not None}
