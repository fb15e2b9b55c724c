"""The packing benchmark shared by Figures 4 and 13: `make bench-unpack` (the packing area's target,
harness/pack/bench.py) packs a model-shaped artifact in every layout at 4..7 average bits and times cold loading,
unpacking and load+unpack end to end. It writes, under <results store>/bench/:
  unpack.csv   one row per measurement: bits, packing, path (unpack kernel), metric, value, unit, repetition, loadavg
               (metrics used here: cold_load_seconds, unpack_seconds, e2e_seconds, instructions_per_weight)
  unpack.json  provenance, and per bits and packing the timeline of the median end-to-end run (per-layer
               load_start/load_end/unpack_start/unpack_end, seconds) that Figure 4 draws.
This module runs it and reads those files; fig4.py and fig13.py compare them with the paper.
"""
from __future__ import annotations

import importlib
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd

from experiments import common

BENCH_TARGET = "bench-unpack"
# The paper's INT4/INT8 mixed padding format is the packing area's `mixed48` layout.
ALIASES = {"int4int8": "mixed48"}


class BenchUnavailable(common.NotAvailable):
    """The packing benchmark (its make target or its output) is not in this checkout."""


def bench_dir(store) -> Path:
    return Path(store.root) / "bench"


def measure(store=None) -> None:
    """Run the benchmark (what `make bench-unpack` runs) with this Python, writing into the store's bench/ folder;
    raises BenchUnavailable when the packing area's benchmark is not in this checkout."""
    from harness.runner.store import ResultsStore

    if importlib.util.find_spec("harness.pack") is None or importlib.util.find_spec("harness.pack.bench") is None:
        raise BenchUnavailable("harness/pack/bench.py (the packing benchmark) is not in this checkout")
    out = bench_dir(store or ResultsStore())
    if (out / "unpack.csv").exists() and (out / "unpack.json").exists():  # resumable, like the sweeps
        print(f"[experiments] packing benchmark already measured in {out}; delete it to measure again",
              file=sys.stderr)
        return
    subprocess.run([sys.executable, "-m", "harness.pack.bench", "--out", str(out)], cwd=common.REPO, check=True)


def rows(store) -> pd.DataFrame:
    """unpack.csv, with packing names as the paper's CSVs use them; empty when the benchmark has not run."""
    path = bench_dir(store) / "unpack.csv"
    if not path.exists():
        return pd.DataFrame(columns=["bits", "packing", "path", "metric", "value", "unit", "repetition", "loadavg",
                                     "bench_dir"])
    df = pd.read_csv(path)
    back = {v: k for k, v in ALIASES.items()}
    return df.assign(packing=df["packing"].replace(back), bench_dir=str(path.parent))


def timelines(store) -> dict:
    """unpack.json's timelines: {bits: {packing: {load_start: [...], ...}}} (packing names as the paper's)."""
    path = bench_dir(store) / "unpack.json"
    if not path.exists():
        return {}
    back = {v: k for k, v in ALIASES.items()}
    doc = json.loads(path.read_text())
    return {int(b): {back.get(p, p): t for p, t in per.items()} for b, per in doc.get("timelines", {}).items()}


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


def plot(kind: str, rows: pd.DataFrame, figures_dir: Path) -> tuple[list[Path], str]:
    """The packing area's figure (harness/plots/<kind>.py, `plot(bench_dir, out_dir)`) for the benchmark these rows
    came from; ([], why) when that module is not in this checkout."""
    try:
        module = importlib.import_module(f"harness.plots.{kind}")
    except ModuleNotFoundError:
        return [], f"No figure: harness/plots/{kind}.py (the packing area's plot) is not in this checkout."
    return list(module.plot(Path(rows["bench_dir"].iloc[0]), figures_dir)), ""


def cap_reasons(rows: pd.DataFrame) -> list[str]:
    """Why the packing benchmark's ratios compare with the paper's only qualitatively: random codes in a small model's
    shape (not Llama3-8B), on this host (not the paper's phone)."""
    models = ", ".join(sorted(rows["model"].dropna().unique())) if "model" in rows.columns else ""
    return [f"random codes in the shape of {models or 'a small model'}, not Llama3-8B",
            "this host, not the paper's phone"]

