"""Sweeps through launchers: the local pool, merging points into --multirun lines, and the launcher configs."""
import itertools
import os
import subprocess
import sys
from pathlib import Path

import pytest

from experiments import fig1, fig10, fig12, fig14, multirun, table4
from harness.registry import CONF_DIR
from harness.runner.store import ResultsStore


def _expand(line: list[str]) -> set[tuple[str, ...]]:
    keys = [o.split("=", 1)[0] for o in line]
    values = [o.split("=", 1)[1].split(",") for o in line]
    return {tuple(f"{k}={v}" for k, v in zip(keys, combo)) for combo in itertools.product(*values)}


@pytest.mark.parametrize("points,n_lines", [
    (fig10.sweep(), 8),  # TTFT: baselines, EdgeFlow; accuracy and fidelity: the baselines, EdgeFlow, the stand-ins
    (fig12.sweep(), 4),  # per budget: AIMET (4 bits only) joins the paper's four methods at 4
    (fig10.sweep(systems=("mnn",), datasets=("mmlu",)), 5),  # ttft, accuracy, fidelity; the INT8 stand-in's two
])
def test_multirun_lines_cover_exactly_the_points(points, n_lines):
    lines = multirun.as_multirun(points)
    expanded = set().union(*(_expand(line) for line in lines))
    assert expanded == {tuple(p) for p in points}
    assert sum(len(_expand(line)) for line in lines) == len(points)  # no point twice
    assert len(lines) == n_lines


def test_ttft_lines_never_run_in_parallel():
    cmds = multirun.commands(fig10.sweep(datasets=("lambada",)), "local_parallel", "/tmp/x")
    for cmd in cmds:
        launcher = next(a for a in cmd if a.startswith("hydra/launcher="))
        assert launcher == ("hydra/launcher=basic" if "experiment=ttft" in cmd else "hydra/launcher=local_parallel")


def test_timed_points_keep_the_artifacts_interleaving():
    points = fig10.sweep(datasets=("lambada", "hellaswag"), systems=("llamacpp", "edgeflow"), bits=(4, 5))
    timed, untimed = multirun.split_timed(points)
    assert timed == [p for p in points if "experiment=ttft" in p] and len(timed) + len(untimed) == len(points)
    order = [tuple(o for o in p if o.startswith(("dataset=", "system="))) for p in timed]
    assert order == [("system=llamacpp", "dataset=lambada")] + [("system=edgeflow", "dataset=lambada")] * 2 + \
        [("system=llamacpp", "dataset=hellaswag")] + [("system=edgeflow", "dataset=hellaswag")] * 2
    assert not any("experiment=ttft" in p for p in untimed)


def test_every_timed_kind_stays_out_of_the_pool():
    """Cold starts under other experiment names (coldstart, pipeline: kind ttft), QNN's compile times, and the
    pipeline simulator's points (their operator costs come from a cold profiled run) as well."""
    first, rest = multirun.split_timed(fig1.sweep())
    assert rest == [] and any("experiment=npu_compile" in p for p in first)
    first, rest = multirun.split_timed(fig14.sweep())
    assert {p[0] for p in first} == {"experiment=pipeline", "experiment=pipeline_sim"} and rest == []
    assert multirun._is_timed(["experiment=accuracy,coldstart"]) and not multirun._is_timed(["experiment=fidelity"])


def test_the_fp_reference_runs_before_the_points_that_pair_with_it():
    first, rest = multirun.split_timed(table4.sweep())
    assert first == [p for p in table4.sweep() if not any(o.startswith("quantizer=") for o in p)] and len(first) == 1
    assert rest and all(any(o.startswith("quantizer=") for o in p) for p in rest)


@pytest.mark.parametrize("environ,cpus,points,jobs,share", [
    ({}, 2, 4, "2", "1"),                      # default: one job per CPU, one thread each
    ({}, 8, 16, "8", "1"),
    ({}, 8, 2, "2", "4"),                      # no more jobs than points: a line of two keeps every core busy
    ({}, 2, 1, "1", "2"),                      # a line of one point runs as it would alone
    ({"EDGEFLOW_JOBS": "2"}, 8, 16, "2", "4"),  # fewer jobs (memory): each gets more threads
    ({"EDGEFLOW_JOBS": "4"}, 2, 16, "4", "1"),
])
def test_pool_jobs_split_the_cpus(environ, cpus, points, jobs, share):
    env = multirun.parallel_env(points, environ, cpus=cpus)
    assert (env["EDGEFLOW_JOBS"], env["OMP_NUM_THREADS"], env["EDGEFLOW_THREADS"]) == (jobs, share, share)


def test_what_the_caller_set_is_kept():
    env = multirun.parallel_env(4, {"EDGEFLOW_JOBS": "2", "OMP_NUM_THREADS": "3", "EDGEFLOW_THREADS": "2"}, cpus=2)
    assert (env["OMP_NUM_THREADS"], env["EDGEFLOW_THREADS"]) == ("3", "2")


def _tiny_perplexity(checkpoint, windows) -> list[str]:
    return ["experiment=perplexity", "model.name=tiny-pool-test", f"model.path={checkpoint}", "model.source=hf",
            f"experiment.ppl_max_windows={windows}", "experiment.extra.ppl_window=64"]


@pytest.mark.real_model  # the tiny model borrows the default model's tokenizer
def test_the_local_pool_runs_every_point_once_and_resumes_without_workers(tiny_checkpoint, tmp_path, monkeypatch):
    points = [_tiny_perplexity(tiny_checkpoint, n) for n in (1, 2, 3)]
    assert multirun.pool(points, tmp_path, cpus=2) == {"ok": 3}
    rows = ResultsStore(tmp_path).read("perplexity")
    assert rows["config_hash"].nunique() == 3 and set(rows["status"]) == {"ok"}

    def no_workers(*args, **kwargs):
        raise AssertionError("a pool started although every point is in the store")
    monkeypatch.setattr(multirun, "ProcessPoolExecutor", no_workers)
    assert multirun.pool(points, tmp_path, cpus=2) == {"skipped": 3}


def test_a_bad_point_fails_the_pool_before_any_work(tmp_path):
    from harness.config import ConfigError

    good = ["experiment=perplexity", "experiment.ppl_max_windows=1"]
    with pytest.raises(ConfigError, match="repetitions"):
        multirun.pool([good, [*good, "experiment.repetitions=0"]], tmp_path, cpus=2)
    assert ResultsStore(tmp_path).read().empty


def test_engines_take_their_thread_budget_from_edgeflow_threads(monkeypatch):
    from harness.runner.sweep import compose_config

    for system in ("edgeflow", "llamacpp", "mnn"):
        assert compose_config(["experiment=ttft", f"system={system}"]).system.threads == 2
    monkeypatch.setenv("EDGEFLOW_THREADS", "1")
    assert compose_config(["experiment=accuracy", "system=llamacpp"]).system.threads == 1


def test_runtime_scored_jobs_without_a_system_take_the_pool_share():
    from harness.engine.run import DEFAULT_THREADS, pool_share_threads

    assert pool_share_threads({}) == DEFAULT_THREADS
    assert pool_share_threads({"EDGEFLOW_THREADS": "1"}) == 1
    for bad in ("0", "two"):
        with pytest.raises(ValueError, match="EDGEFLOW_THREADS"):
            pool_share_threads({"EDGEFLOW_THREADS": bad})


def test_make_sweeps_in_a_pool_where_there_is_more_than_one_cpu():
    repo = Path(__file__).resolve().parents[2]

    def command(*prefix: str, extra: tuple[str, ...] = ()) -> str:
        env = {**os.environ, "OMP_NUM_THREADS": "1"}  # which nproc obeys; the pool's size is the CPUs, not it
        out = subprocess.run([*prefix, "make", "-n", "-s", "reproduce-fig12", *extra], cwd=repo, check=True,
                             capture_output=True, text=True, env=env).stdout
        return out.strip().splitlines()[-1]

    if len(os.sched_getaffinity(0)) > 1:
        assert "--launcher local_parallel" in command()
    assert "--launcher" not in command("taskset", "-c", str(min(os.sched_getaffinity(0))))  # one CPU: in process
    assert "--launcher" not in command(extra=("LAUNCHER=",))
    assert "--launcher slurm" in command(extra=("LAUNCHER=slurm",))


def _launcher(name: str):
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        return compose(config_name="config", overrides=[f"hydra/launcher={name}"], return_hydra_config=True).hydra.launcher


def test_local_parallel_composes_to_joblib(monkeypatch):
    monkeypatch.setenv("EDGEFLOW_JOBS", "3")
    launcher = _launcher("local_parallel")
    assert launcher._target_.endswith("JoblibLauncher")
    assert launcher.n_jobs == 3


@pytest.mark.parametrize("name,gpus", [("slurm", 0), ("slurm_gpu", 1)])
def test_slurm_launchers_compose(name, gpus):
    launcher = _launcher(name)
    assert launcher._target_.endswith("SlurmLauncher")
    assert launcher.gpus_per_node == gpus and launcher.mem_gb > 0 and launcher.timeout_min > 0


@pytest.mark.real_model
@pytest.mark.slow  # two fresh processes import torch and load the model
def test_two_point_multirun_through_joblib(tmp_path):
    """Two smoke configurations (differing only in repetitions) through the joblib pool, rows in one store. The
    smoke work is cut to one perplexity window and a few items: the launcher is under test, not the numbers (the
    full smoke config made this the suite's slowest test, 173-216 s)."""
    env = {**os.environ, "EDGEFLOW_JOBS": "2", "PYTHONPATH": str(multirun.paper_values.REPO)}
    cmd = [sys.executable, "-m", "harness", "--multirun", "hydra/launcher=local_parallel", "experiment=smoke",
           "experiment.repetitions=1,2", "experiment.ppl_max_windows=1", "experiment.eval_limit=5",
           f"run.results_dir={tmp_path}", f"hydra.sweep.dir={tmp_path / 'hydra'}"]
    subprocess.run(cmd, cwd=multirun.paper_values.REPO, env=env, check=True, capture_output=True, timeout=600)
    rows = ResultsStore(tmp_path).read("smoke")
    assert set(rows["status"]) == {"ok"}
    assert rows["config_hash"].nunique() == 2
