"""The packing benchmark shared by Figures 4 and 13: `make bench-unpack` (the packing area's target) measures load
and unpack times per packed format and writes JSON under <results store>/bench/; its plot functions live in
harness/plots/. This module runs it and finds its output; fig4.py and fig13.py draw it beside the paper.
"""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from experiments import common

BENCH_TARGET = "bench-unpack"


class BenchUnavailable(common.NotAvailable):
    """The packing benchmark (its make target, its output or its plot functions) is not in this checkout."""


def bench_dir(store) -> Path:
    return Path(store.root) / "bench"


def has_target(target: str = BENCH_TARGET) -> bool:
    if shutil.which("make") is None:
        return False
    probe = subprocess.run(["make", "-n", target], cwd=common.REPO, capture_output=True, text=True)
    return probe.returncode == 0


def measure() -> None:
    """Run the benchmark; raises BenchUnavailable naming what is missing."""
    if not has_target():
        raise BenchUnavailable(f"this checkout's Makefile has no `{BENCH_TARGET}` target (packing benchmark)")
    subprocess.run(["make", BENCH_TARGET], cwd=common.REPO, check=True)


def results(store) -> list[tuple[Path, dict]]:
    """Every JSON the benchmark wrote, oldest first, as (path, parsed)."""
    folder = bench_dir(store)
    paths = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime) if folder.is_dir() else []
    return [(p, json.loads(p.read_text())) for p in paths]
