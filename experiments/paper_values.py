"""The paper's reference values: results/paper/<artifact>.csv (each with its source in '#' lines), read and
written as statements, and the paper's testbed."""
from __future__ import annotations

import math
from pathlib import Path

import pandas as pd


REPO = Path(__file__).resolve().parents[1]
PAPER_DIR = REPO / "results" / "paper"


# The paper's testbed (section 5.1): Xiaomi 15 Pro, Snapdragon 8 Elite (SoC model SM8750). A row's device is the
# paper's when its device_info names that SoC on a real phone (not the loopback sandbox) without flash emulation.
PAPER_SOCS = ("SM8750",)


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
