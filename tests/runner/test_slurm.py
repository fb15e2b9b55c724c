"""Sweeps through a real SLURM controller (the single-node cluster of tests/runner/slurm_cluster.py) with
`python -m harness --multirun hydra/launcher=slurm`: rows land in one shared store, a failing task is a failed row,
a cancelled task leaves no row and a resubmission measures only it, and TTFT jobs hold their device exclusively."""
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.runner.store import ResultsStore
from tests.runner.slurm_cluster import die_with_parent

# one worker of `make test`'s (--dist loadgroup) runs them all: one cluster per module, not one per worker
pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.xdist_group("slurm")]
REPO = Path(__file__).resolve().parents[2]
SUBMIT_TIMEOUT_S = 900  # a whole sweep, submission to the last task, on a busy 2-core host


def tiny_model(tiny_checkpoint, name="tiny-slurm-test"):
    return [f"model.name={name}", f"model.path={tiny_checkpoint}", "model.source=hf"]


def sweep_cmd(cluster, tmp_path, sweep: str, *overrides: str) -> list[str]:
    return [sys.executable, "-m", "harness", "--multirun", "hydra/launcher=slurm",
            f"hydra.launcher.partition={cluster.partition}", "hydra.launcher.cpus_per_task=1",
            "hydra.launcher.mem_gb=2", "hydra.launcher.timeout_min=20", f"hydra.sweep.dir={tmp_path / sweep}",
            f"run.results_dir={tmp_path / 'store'}", *overrides]


def submit(cluster, cmd, timeout=SUBMIT_TIMEOUT_S, background=False):
    """Run the submitter (it waits for every task) with the cluster's SLURM_CONF; killed with its group on timeout."""
    env = cluster.env({**os.environ, "PYTHONPATH": str(REPO), "HYDRA_FULL_ERROR": "1"})
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True, preexec_fn=die_with_parent)
    if background:
        return proc
    return finish(proc, timeout)


def finish(proc, timeout=SUBMIT_TIMEOUT_S):
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate(timeout=30)
        raise AssertionError(f"the submitter did not finish in {timeout} s; its output:\n{out[-4000:]}") from None
    return proc.returncode, out


def task_logs(sweep_dir: Path) -> str:
    logs = sorted((sweep_dir / ".submitit").glob("*/*_log.*"))
    return "\n".join(f"--- {p.relative_to(sweep_dir)} ---\n{p.read_text(errors='replace')[-3000:]}" for p in logs)


def wait_for(what, check, timeout=SUBMIT_TIMEOUT_S, poll=0.5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def array_tasks(cluster, array_id: str) -> dict[str, str]:
    return {j["id"]: j["state"] for j in cluster.jobs() if j["id"].startswith(f"{array_id}_")}


def ended(cluster, array_id: str) -> dict[str, str]:
    """The array's tasks and their states once none is pending, running or completing (the submitter returns as soon
    as every result file exists, while SLURM may still be finishing the last task)."""
    return wait_for(f"array {array_id} to end", lambda: (t := array_tasks(cluster, array_id)) and all(
        s in ("COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL") for s in t.values()) and t,
        timeout=120)


def submitted_array(out: str) -> str | None:
    found = re.findall(r"\.submitit/(\d+)_", out)
    return found[0] if found else None


def test_the_cluster_runs_jobs(slurm_cluster):
    out = slurm_cluster.run("srun", "--ntasks=1", "--time=1", "hostname", timeout=60).stdout.strip()
    assert out and slurm_cluster.cpus >= 1
    assert "COMPLETED" in slurm_cluster.accounting()


def test_accuracy_and_perplexity_sweep_and_a_failing_task(slurm_cluster, tiny_checkpoint, tmp_path):
    """4 array tasks: accuracy and perplexity of the tiny model, and of a copy with a corrupt weights file."""
    broken = tmp_path / "broken-checkpoint"
    shutil.copytree(tiny_checkpoint, broken)
    weights = broken / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])  # truncated: loading it raises
    cmd = sweep_cmd(slurm_cluster, tmp_path, "sweep", "experiment=accuracy,perplexity", "dataset=lambada-local",
                    "model.name=tiny-slurm-test", f"model.path={tiny_checkpoint},{broken}", "model.source=hf",
                    "++experiment.eval_limit=8", "++experiment.ppl_max_windows=1", "++experiment.extra.ppl_window=128")
    code, out = submit(slurm_cluster, cmd)
    assert code == 0, f"{out[-4000:]}\n{task_logs(tmp_path / 'sweep')}"

    array = submitted_array(task_logs(tmp_path / "sweep"))
    assert array and set(ended(slurm_cluster, array).values()) == {"COMPLETED"}
    assert len(array_tasks(slurm_cluster, array)) == 4
    store = ResultsStore(tmp_path / "store")
    for experiment, metric in (("accuracy", "accuracy"), ("perplexity", "perplexity")):
        rows = store.read(experiment)
        assert rows["config_hash"].nunique() == 2, rows[["config_hash", "status", "metric"]]
        ok, failed = rows[rows.status == "ok"], rows[rows.status == "failed"]
        values = ok.loc[ok.metric == metric, "value"]
        assert len(values) == 1 and values.notna().all()  # (a random tiny model's accuracy may well be 0)
        assert (values > 0).all() if metric == "perplexity" else values.between(0, 1).all()
        assert len(failed) == 1 and failed.iloc[0]["metric"] == "error" and failed.iloc[0]["label"] == "not run"
        assert "Error" in failed.iloc[0]["error"] and "Traceback" in failed.iloc[0]["error"]
        assert set(ok["config_hash"]).isdisjoint(failed["config_hash"])


@pytest.mark.real_model
def test_a_cancelled_task_leaves_no_row_and_a_resubmission_measures_only_it(slurm_cluster, tiny_checkpoint, tmp_path):
    """Two TTFT tasks on two pseudo-devices; the test holds the lock of the second device (harness/devices/lock.py),
    so task 1 waits for it, however fast the host, until the test cancels it: it can never finish first."""
    from harness.devices import DeviceConfig, get_device
    from harness.devices.lock import device_lock
    from harness.models.zoo import ModelSpec
    from harness.systems import SystemConfig, get_system

    # llama.cpp and the tiny model's GGUF are built once here (cached), not inside the tasks
    spec = ModelSpec(name="tiny-slurm-cancel", source="hf", path=str(tiny_checkpoint))
    device = get_device(DeviceConfig(name="local"))
    get_system(SystemConfig(name="llamacpp")).prepare(spec, 8, device)
    device.close()

    locks = tmp_path / "locks"
    cmd = sweep_cmd(slurm_cluster, tmp_path, "first", "experiment=ttft", "system=llamacpp",
                    *tiny_model(tiny_checkpoint, "tiny-slurm-cancel"), "+experiment.extra.prompt_tokens=16",
                    "+device.id=pseudo-free,pseudo-held", "protocol.repetitions=1", "protocol.warmup_runs=0",
                    "protocol.busy_policy=flag", f"run.device_lock_dir={locks}", "hydra.launcher.array_parallelism=2")
    with device_lock("pseudo-held", locks, timeout_s=0):
        proc = submit(slurm_cluster, cmd, background=True)
        try:
            array = wait_for("the array to be submitted", lambda: submitted_array(
                " ".join(str(p) for p in (tmp_path / "first" / ".submitit").glob("*_*"))) or _poll_dead(proc))
            # task 0 measures pseudo-free; task 1 runs but waits for the lock this test holds
            wait_for(f"task {array}_0 to complete and {array}_1 to run", lambda: (
                (t := array_tasks(slurm_cluster, array)).get(f"{array}_0") == "COMPLETED"
                and t.get(f"{array}_1") == "RUNNING") or _poll_dead(proc), poll=0.2)
            slurm_cluster.run("scancel", f"{array}_1")
            code, out = finish(proc)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    # SLURM's own record decides: task 0 completed, task 1 was cancelled. The submitter's exit is submitit's business
    # (it normally stops with UncompletedJobError, state CANCELLED), so the store is read after the array has ended.
    tasks = ended(slurm_cluster, array)
    assert tasks == {f"{array}_0": "COMPLETED", f"{array}_1": "CANCELLED"}, f"submitter exit {code}: {out[-3000:]}"
    if code != 0:
        assert "CANCELLED" in out, out[-3000:]
    store = ResultsStore(tmp_path / "store")
    first = store.read("ttft")
    assert first["config_hash"].nunique() == 1  # nothing of the cancelled task
    assert set(first["status"]) == {"ok"}, f"{set(first['error'].dropna())}\n{task_logs(tmp_path / 'first')}"
    assert set(first["device"]) == {"pseudo-free"}
    parts_before = set((tmp_path / "store" / "ttft").glob("part-*.parquet"))

    # the same sweep again (its own Hydra folder), the lock released: task 0 skips, task 1 measures
    code, out = submit(slurm_cluster, [a if not a.startswith("hydra.sweep.dir=") else
                                       f"hydra.sweep.dir={tmp_path / 'second'}" for a in cmd])
    logs = task_logs(tmp_path / "second")
    assert code == 0, f"{out[-3000:]}\n{logs}"
    assert logs.count("already measured, skipping") == 1, logs
    new_parts = set((tmp_path / "store" / "ttft").glob("part-*.parquet")) - parts_before
    assert len(new_parts) == 1  # only the cancelled configuration was measured again
    both = store.read("ttft")
    assert both["config_hash"].nunique() == 2 and set(both["status"]) == {"ok"}
    assert set(both["device"]) == {"pseudo-free", "pseudo-held"}
    assert (both[both.metric == "ttft_s"].groupby("config_hash").size() == 1).all()  # one run each, none twice


def _poll_dead(proc):
    if proc.poll() is not None:
        raise AssertionError(f"the submitter exited early ({proc.returncode}): {proc.stdout.read()[-3000:]}")
    return None


@pytest.mark.real_model
def test_ttft_jobs_hold_their_device_exclusively(slurm_cluster, tiny_checkpoint, tmp_path):
    """Four TTFT array tasks, two on each of two pseudo-devices (local, named pseudo-a and pseudo-b): the intervals
    during which a device was held never overlap for the same device; rows name the device."""
    from harness.devices import DeviceConfig, get_device
    from harness.models.zoo import ModelSpec
    from harness.systems import SystemConfig, get_system

    # llama.cpp and the tiny model's GGUF are built once here (cached), not inside the timed tasks
    spec = ModelSpec(name="tiny-slurm-ttft", source="hf", path=str(tiny_checkpoint))
    device = get_device(DeviceConfig(name="local"))
    get_system(SystemConfig(name="llamacpp")).prepare(spec, 8, device)
    device.close()

    cmd = sweep_cmd(slurm_cluster, tmp_path, "ttft", "experiment=ttft", "system=llamacpp",
                    *tiny_model(tiny_checkpoint, "tiny-slurm-ttft"), "+experiment.extra.prompt_tokens=16",
                    "+device.id=pseudo-a,pseudo-b", "protocol.repetitions=1,2", "protocol.warmup_runs=0",
                    "protocol.busy_policy=flag", f"run.device_lock_dir={tmp_path / 'locks'}",
                    "hydra.launcher.array_parallelism=4")
    code, out = submit(slurm_cluster, cmd)
    assert code == 0, f"{out[-3000:]}\n{task_logs(tmp_path / 'ttft')}"
    rows = ResultsStore(tmp_path / "store").read("ttft")
    assert set(rows["status"]) == {"ok"}, rows[rows.status != "ok"][["error"]].to_string()
    assert set(rows["device"]) == {"pseudo-a", "pseudo-b"}
    assert (rows.loc[rows.metric == "ttft_s", "value"] > 0).all()
    locks = rows[rows.metric == "device_lock_wait_s"]
    assert len(locks) == 4
    spans = {}
    for _, r in locks.iterrows():
        m = re.search(r"held exclusively from ([\d.]+) to ([\d.]+)", r["notes"])
        spans.setdefault(r["device"], []).append((float(m.group(1)), float(m.group(2))))
    for dev, intervals in spans.items():
        (a0, a1), (b0, b1) = sorted(intervals)
        assert a1 <= b0, f"{dev}: two TTFT jobs held the device at once: {intervals}"
    # every measurement row of a job lies inside its locked interval
    for dev, intervals in spans.items():
        for _, r in rows[(rows.device == dev) & (rows.metric == "ttft_s")].iterrows():
            assert any(t0 - 1 <= _epoch(r["time"]) <= t1 + 1 for t0, t1 in intervals)


def _epoch(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso).timestamp()
