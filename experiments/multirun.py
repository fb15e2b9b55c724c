"""Run an artifact's sweep through a Hydra launcher (conf/hydra/launcher/: local_parallel, slurm, slurm_gpu).

An artifact's sweep is a list of override lists, not always a Cartesian product (Figure 10 sweeps bits only for
EdgeFlow), while `--multirun` takes products. `as_multirun` merges the points into as few product lines as cover them
exactly; each line then runs as `python -m harness --multirun hydra/launcher=<name> ...`, which hands its jobs to the
launcher (a local process pool, a SLURM array). Rows land in the same store, so `render` afterwards is unchanged.
"""
from __future__ import annotations

import math
import os
import subprocess
import sys

from experiments import common


def _parse(point: list[str]) -> dict[str, str]:
    out = {}
    for override in point:
        key, sep, value = override.partition("=")
        if not sep or "," in value:
            raise ValueError(f"cannot sweep override {override!r}: expected key=value without commas")
        out[key] = value
    return out


def _merge(keys: list[str], points: list[dict[str, str]]) -> list[list[str]]:
    values = {k: list(dict.fromkeys(p[k] for p in points)) for k in keys}
    unique = {tuple(p[k] for k in keys) for p in points}
    if math.prod(len(v) for v in values.values()) == len(unique):
        return [[f"{k}={','.join(v)}" for k, v in values.items()]]
    # not a product: cut along the varying key with the fewest values (fewest lines, e.g. a quantizer that takes
    # only some of the budgets splits the budgets, not the datasets)
    split = min((k for k in keys if len(values[k]) > 1), key=lambda k: len(values[k]))
    return [line for v in values[split] for line in _merge(keys, [p for p in points if p[split] == v])]


def as_multirun(points: list[list[str]]) -> list[list[str]]:
    """Override lines with comma sweeps whose products are exactly `points` (no point lost or added)."""
    groups: dict[tuple[str, ...], list[dict[str, str]]] = {}
    for point in points:
        parsed = _parse(point)
        groups.setdefault(tuple(parsed), []).append(parsed)
    return [line for keys, group in groups.items() for line in _merge(list(keys), group)]


# Cold-start timings must not share the machine with other jobs: these kinds always run one at a time.
SEQUENTIAL_KINDS = {"experiment=ttft"}


def split_timed(points: list[list[str]]) -> tuple[list[list[str]], list[list[str]]]:
    """(timed, untimed): the points of SEQUENTIAL_KINDS in the artifact's order, which interleaves the systems a
    ratio compares (per dataset, per bit-width) so that a drifting host shifts them alike, and the rest. Product
    lines would group the timed points by system, minutes apart: the caller runs them one after another in its own
    process, and only the untimed ones through a launcher."""
    timed = [p for p in points if SEQUENTIAL_KINDS & set(p)]
    return timed, [p for p in points if not SEQUENTIAL_KINDS & set(p)]


def commands(points: list[list[str]], launcher: str, results_dir) -> list[list[str]]:
    out = []
    for line in as_multirun(points):
        chosen = "basic" if SEQUENTIAL_KINDS & set(line) else launcher
        out.append([sys.executable, "-m", "harness", "--multirun", f"hydra/launcher={chosen}", *line,
                    f"run.results_dir={results_dir}"])
    return out


def line_points(line: list[str]) -> int:
    """How many configurations a --multirun line sweeps (the product of its comma lists)."""
    return math.prod(len(o.partition("=")[2].split(",")) for o in line if "=" in o)


def parallel_env(points: int, environ=os.environ, cpus: int | None = None) -> dict[str, str]:
    """The environment of a line of `points` configurations that runs in a local process pool: EDGEFLOW_JOBS jobs
    (default: one per CPU this process may use, at most one per point), each with its share of those CPUs for torch
    (OMP_NUM_THREADS) and for the engines' system.threads (EDGEFLOW_THREADS, conf/system/*.yaml): N jobs x 2
    threads on N cores would oversubscribe them, and a line of one point keeps every core. What the caller set is
    kept."""
    cpus = cpus or len(os.sched_getaffinity(0))
    jobs = max(1, min(int(environ.get("EDGEFLOW_JOBS") or cpus), points))
    share = str(max(1, cpus // jobs))
    return {**environ, "EDGEFLOW_JOBS": str(jobs), "OMP_NUM_THREADS": environ.get("OMP_NUM_THREADS") or share,
            "EDGEFLOW_THREADS": environ.get("EDGEFLOW_THREADS") or share}


def launch(points: list[list[str]], launcher: str, results_dir) -> None:
    """Run every multirun line; a failing configuration is a row in the store, a failing launcher an exception."""
    for cmd in commands(points, launcher, results_dir):
        print("[experiments] " + " ".join(cmd[1:]), file=sys.stderr)
        env = parallel_env(line_points(cmd[4:])) if "hydra/launcher=local_parallel" in cmd else None
        subprocess.run(cmd, cwd=common.REPO, check=True, env=env)
