"""Run an artifact's sweep through a launcher: `local_parallel` (a pool of worker processes on this machine) or a
Hydra launcher (conf/hydra/launcher/: slurm, slurm_gpu).

An artifact's sweep is a list of override lists, not always a Cartesian product (Figure 10 sweeps bits only for
EdgeFlow), while `--multirun` takes products. For Hydra, `as_multirun` merges the points into as few product lines as
cover them exactly; each line then runs as `python -m harness --multirun hydra/launcher=<name> ...`, which hands its
jobs to the launcher (a SLURM array). On this machine `pool` runs the points themselves, one queue for the whole
artifact: product lines one after another would leave a core idle at the end of each line (while its slowest point
finishes) and start fresh workers for every line. Rows land in the same store, so `render` afterwards is unchanged.
"""
from __future__ import annotations

import collections
import contextlib
import functools
import math
import multiprocessing
import os
import subprocess
import sys
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool

import yaml
from tqdm import tqdm

from experiments import paper_values


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


def _kinds(point: list[str]) -> set[str]:
    """The experiment kinds a point (or a --multirun line: experiment=a,b) runs: an explicit experiment.kind=, else
    each experiment's conf/experiment/<name>.yaml (conf/config.yaml's default: smoke)."""
    overrides = {k.lstrip("+"): v for k, sep, v in (o.partition("=") for o in point) if sep}
    if "experiment.kind" in overrides:
        return set(overrides["experiment.kind"].split(","))
    return {_experiment_kind(name) for name in overrides.get("experiment", "smoke").split(",")}


@functools.lru_cache(maxsize=None)
def _experiment_kind(name: str) -> str:
    from harness.registry import conf_group

    path = conf_group("experiment") / f"{name}.yaml"
    return str(yaml.safe_load(path.read_text())["kind"]) if path.is_file() else name


def _is_timed(point: list[str]) -> bool:
    from harness.runner.kinds import TIMED_KINDS

    return bool(_kinds(point) & TIMED_KINDS)


def _runs_first(point: list[str]) -> bool:
    """A timed point (TIMED_KINDS: cold starts, QNN compiles), or a reference the other points pair with: the FP
    model's perplexity (no quantizer), whose cached windows every quantized perplexity point reads
    (harness/eval/sized_perplexity.py): run first, it scores them on every core; beside them, the points would take
    turns scoring them on one core each."""
    reference = _kinds(point) == {"perplexity"} and not any(o.startswith("quantizer=") for o in point)
    return _is_timed(point) or reference


def split_timed(points: list[list[str]]) -> tuple[list[list[str]], list[list[str]]]:
    """(first, rest): the timed points and the references others pair with, in the artifact's
    order, which interleaves the systems a ratio compares (per dataset, per bit-width) so that a drifting host shifts
    them alike; and the rest. Product lines would group the timed points by system, minutes apart: the caller runs
    the first ones one after another in its own process, and only the rest through a launcher."""
    return [p for p in points if _runs_first(p)], [p for p in points if not _runs_first(p)]


def commands(points: list[list[str]], launcher: str, results_dir) -> list[list[str]]:
    out = []
    for line in as_multirun(points):
        chosen = "basic" if _is_timed(line) else launcher
        out.append([sys.executable, "-m", "harness", "--multirun", f"hydra/launcher={chosen}", *line,
                    f"run.results_dir={results_dir}"])
    return out


def parallel_env(points: int, environ=os.environ, cpus: int | None = None) -> dict[str, str]:
    """The environment of `points` configurations that run in a local process pool: EDGEFLOW_JOBS jobs (default:
    one per CPU this process may use, at most one per point), each with its share of those CPUs for torch
    (OMP_NUM_THREADS) and for the engines' system.threads (EDGEFLOW_THREADS, conf/system/*.yaml): N jobs x 2
    threads on N cores would oversubscribe them, and a single point keeps every core. What the caller set is kept."""
    cpus = cpus or len(os.sched_getaffinity(0))
    jobs = max(1, min(int(environ.get("EDGEFLOW_JOBS") or cpus), points))
    share = str(max(1, cpus // jobs))
    return {**environ, "EDGEFLOW_JOBS": str(jobs), "OMP_NUM_THREADS": environ.get("OMP_NUM_THREADS") or share,
            "EDGEFLOW_THREADS": environ.get("EDGEFLOW_THREADS") or share}


LOCAL_POOL = "local_parallel"


def launch(points: list[list[str]], launcher: str, results_dir, desc: str = "pool") -> None:
    """Run the points through `launcher`; a failing configuration is a row in the store, a failing launcher (or a
    pool worker that dies) an exception."""
    if launcher == LOCAL_POOL:
        counts = pool(points, results_dir, desc=desc)
        print(f"[experiments] {desc}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())), file=sys.stderr)
        return
    for cmd in commands(points, launcher, results_dir):
        print("[experiments] " + " ".join(cmd[1:]), file=sys.stderr)
        subprocess.run(cmd, cwd=paper_values.REPO, check=True)


@contextlib.contextmanager
def _environ(env: dict[str, str]):
    """os.environ replaced by `env` for the block: spawned workers start from it, torch reads OMP_NUM_THREADS when
    it is imported there, and the engines' thread count (EDGEFLOW_THREADS) resolves in it."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _run_point(cfg, results_dir) -> str:
    from harness.runner.job import run_job
    from harness.runner.store import ResultsStore

    return run_job(cfg, ResultsStore(results_dir))


def pool(points: list[list[str]], results_dir, desc: str = "pool", cpus: int | None = None) -> collections.Counter:
    """Run `points` in one pool of worker processes (parallel_env: one per CPU, each with its share of them), in the
    artifact's order: a worker that finishes takes the next point. Every point is validated first (a bad one fails
    before any work) and those already in the store are skipped here, so a finished artifact starts no worker."""
    from harness.runner.job import prepare_job
    from harness.runner.store import ResultsStore
    from harness.runner.sweep import compose_config

    counts: collections.Counter = collections.Counter()
    store = ResultsStore(results_dir)
    with _environ(parallel_env(len(points), cpus=cpus)):  # the hashes of engine points include the thread share
        todo = []
        for overrides in points:
            cfg = compose_config(overrides)
            job = prepare_job(cfg)
            if cfg.run.resume and job.config_hash in store.completed(job.experiment.name):
                counts["skipped"] += 1
            else:
                todo.append((overrides, cfg))
        if not todo:
            return counts
        jobs = int(os.environ["EDGEFLOW_JOBS"])
        bar = tqdm(total=len(todo), desc=f"{desc}, {jobs} jobs of {os.environ['EDGEFLOW_THREADS']} thread(s)",
                   unit="config", file=sys.stderr)
        queue = collections.deque(todo)
        running: dict = {}  # at most `jobs` futures, so a dead worker's points are known
        with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as executor:
            while queue or running:
                while queue and len(running) < jobs:
                    overrides, cfg = queue.popleft()
                    running[executor.submit(_run_point, cfg, str(results_dir))] = overrides
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in done:
                    overrides = running.pop(future)
                    try:
                        counts[future.result()] += 1
                    except BrokenProcessPool:
                        lost = [overrides, *running.values()]
                        raise RuntimeError("a pool worker died (a crash in an engine?) running one of: "
                                           + "; ".join(" ".join(p) for p in lost)
                                           + ". Rows already stored are kept: run again to resume.") from None
                    bar.update()
                    bar.set_postfix_str(" ".join(o for o in overrides if not o.startswith("experiment="))[:60])
        bar.close()
    return counts
