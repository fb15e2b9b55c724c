"""The packing benchmark shared by Figures 4 and 13: `make bench-unpack` (harness/bench/unpack.py) packs a
model-shaped artifact in every layout at 4..7 average bits and times cold loading, unpacking and load+unpack end to
end. Its rows are in the results store (experiment `bench-unpack`: bits, packing, variant = the unpack kernel,
metric, value, repetition, load_avg_1m), and beside them unpack.json holds the run's summary and,
per bits and packing, the per-layer timeline of the median end-to-end run that Figure 4 draws.
This module runs it and reads both; fig4.py and fig13.py compare them with the paper.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd

from experiments import paper_values, selection

EXPERIMENT = "bench-unpack"
BENCH_TARGET = "bench-unpack"
TIMELINES = "unpack.json"
# The paper's INT4/INT8 mixed padding format is the packing area's `mixed48` layout.
ALIASES = {"int4int8": "mixed48"}
LABELS = {"int8": "INT8 (padded)", "int4int8": "INT4/INT8 mixed", "kquant": "K-quant-like",
          "weightlet": "EdgeFlow weightlet"}
COLORS = {"int8": "#999999", "int4int8": "#4c72b0", "kquant": "#dd8452", "weightlet": "#55a868"}


def bench_dir(store) -> Path:
    return Path(store.root) / EXPERIMENT


def measure(store=None) -> None:
    """Run the benchmark (what `make bench-unpack` runs) with this Python into the store, unless it already holds a
    run (resumable, like the sweeps)."""
    from harness.runner.store import ResultsStore

    store = store or ResultsStore()
    if not store.read(EXPERIMENT).empty and (bench_dir(store) / TIMELINES).exists():
        print(f"[experiments] packing benchmark already measured in {bench_dir(store)}; delete it to measure again",
              file=sys.stderr)
        return
    subprocess.run([sys.executable, "-m", "harness.bench.unpack", "--results", str(store.root)], cwd=paper_values.REPO,
                   check=True)


def rows(store) -> pd.DataFrame:
    """The latest run's rows, with packing names as the paper's CSVs use them, `path` (the unpack kernel) and
    `loadavg` columns; empty when the benchmark has not run."""
    df = selection.current(store.read(EXPERIMENT))
    back = {v: k for k, v in ALIASES.items()}
    return df.assign(packing=df["packing"].replace(back), path=df["variant"], loadavg=df["load_avg_1m"],
                     bench_dir=str(bench_dir(store)))


def document(rows: pd.DataFrame) -> dict:
    """unpack.json of the run these rows came from: provenance, summary and timelines ({} without it)."""
    path = Path(rows["bench_dir"].iloc[0]) / TIMELINES if len(rows) else None
    return json.loads(path.read_text()) if path is not None and path.exists() else {}


def timelines(rows: pd.DataFrame) -> dict:
    """{bits: {packing: {load_start: [...], ...}}} (packing names as the paper's)."""
    back = {v: k for k, v in ALIASES.items()}
    return {int(b): {back.get(p, p): t for p, t in per.items()} for b, per in document(rows).get("timelines", {}).items()}


def medians(df: pd.DataFrame) -> pd.DataFrame:
    """Median per (bits, packing, metric); for the weightlet layout, of its fastest measured unpack path that is not
    the scalar reference (the one a device would use)."""
    med = df.groupby(["bits", "packing", "path", "metric"])["value"].median().reset_index()
    simd = med[(med["path"] != "scalar")]
    best = simd[simd["metric"] == "unpack_seconds"].sort_values("value").groupby(["bits", "packing"]).head(1)
    keep = set(zip(best["bits"], best["packing"], best["path"]))
    per_path = simd["metric"].isin(["unpack_seconds", "instructions_per_weight"])
    kept = pd.Series([k in keep for k in zip(simd["bits"], simd["packing"], simd["path"])], index=simd.index)
    chosen = simd[~per_path | kept]
    return chosen.groupby(["bits", "packing", "metric"]).agg(value=("value", "first"), path=("path", "first")).reset_index()


def value(med: pd.DataFrame, bits, packing: str, metric: str) -> float:
    hit = med[(med["bits"] == bits) & (med["packing"] == packing) & (med["metric"] == metric)]
    return float(hit["value"].iloc[0]) if len(hit) else float("nan")


def cap_reasons(rows: pd.DataFrame) -> list[str]:
    """Why the packing benchmark's ratios compare with the paper's only qualitatively: random codes in a small model's
    shape (not Llama3-8B), on this host (not the paper's phone)."""
    models = ", ".join(sorted(rows["model"].dropna().unique())) if "model" in rows.columns else ""
    return [f"random codes in the shape of {models or 'a small model'}, not Llama3-8B",
            "this host, not the paper's phone"]

