"""The runtime's pipeline policies (conf/pipeline/) and the simulator that replays its scheduler
(harness/pipeline_sim.py): every policy computes the same logits and tokens, the simulator's task order equals the
runtime's in the deterministic one-thread mode, and the harness passes the pipeline group through to edgeflow-run."""
from __future__ import annotations

import json
import subprocess

import pytest
import torch

from harness.measure.workload import Workload
from harness.pack import pack_artifact
from harness.pipeline_sim import POLICIES, CostTable, build_graph, profile_order, simulate
from harness.engine.build import engine_binary
from harness.engine.capi import NativeEngine
from tests.runtime.conftest import make_artifact, tiny_llama

PROMPT = [3, 17, 99, 4, 250, 8, 8, 1, 42, 77, 5]


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    artifact = make_artifact(tiny_llama(seed=5, tie=False), seed=6)
    return pack_artifact(artifact, tmp_path_factory.mktemp("packed") / "tiny.efpk", layout="weightlet")


@pytest.fixture(scope="module")
def binary():
    return str(engine_binary("host"))


def run(binary, packed, *args):
    proc = subprocess.run([binary, str(packed), "--tokens", ",".join(map(str, PROMPT)), *args],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.native
def test_every_policy_same_logits_and_tokens(packed, binary, tmp_path):
    with NativeEngine.open(packed, threads=1, chunk=64) as ref:
        want = ref.set_schedule("place").logits(PROMPT)
    tokens = None
    for policy in POLICIES:
        for threads, chunk, extra in ((2, 3, ()), (3, 2, ("--steal-threshold", "0")), (2, 4, ("--no-lane-help",))):
            with NativeEngine.open(packed, threads=threads, chunk=chunk) as e:
                got = e.set_schedule(policy, steal_threshold=0).logits(PROMPT)
            assert torch.equal(got, want), (policy, threads, chunk)
            report = json.loads(run(binary, packed, "--policy", policy, "--threads", str(threads), "--chunk",
                                    str(chunk), "--new-tokens", "3", "--json", *extra))
            tokens = tokens or report["tokens"]
            assert report["tokens"] == tokens and report["policy"] == policy
            lanes = report["lanes"]
            assert lanes["cpu"]["threads"] + lanes["accel"]["threads"] == threads
            for lane in ("cpu", "accel"):
                assert 0 <= lanes[lane]["bubble_rate"] <= 1
                assert lanes[lane]["busy_s"] + lanes[lane]["idle_s"] == pytest.approx(
                    lanes[lane]["threads"] * lanes["span_s"], rel=1e-3, abs=1e-5)
            assert set(report["op_s"]) >= {"load", "unpack", "qkv", "attention", "down", "head"}
            if policy != "place+priority+steal":
                assert lanes["cpu"]["stolen"] == 0


@pytest.mark.native
def test_bad_policy_options_are_usage_errors(packed, binary):
    for args, msg in ((["--policy", "fast"], "unknown pipeline policy 'fast'"),
                      (["--threads", "2", "--accel-threads", "2"], "accelerator threads must be in"),
                      (["--steal-threshold", "-1"], "needs an integer >= 0")):
        proc = subprocess.run([binary, str(packed), "--tokens", "1,2", *args], capture_output=True, text=True)
        assert proc.returncode == 2 and msg in proc.stderr, proc.stderr
    with NativeEngine.open(packed, threads=2) as e, pytest.raises(ValueError, match="unknown pipeline policy"):
        e.set_schedule("fast")


@pytest.mark.native
@pytest.mark.parametrize("policy", POLICIES)
def test_simulator_order_equals_runtime_order(packed, binary, tmp_path, policy):
    """One compute thread: the runtime's order depends on the graph, placements and priorities only (the warm
    prefill, whose weights are in memory); the simulator over the measured costs must start tasks in that order."""
    prof = tmp_path / "ops.json"
    run(binary, packed, "--threads", "1", "--chunk", "3", "--policy", policy, "--repeat-prefill", "1",
        "--profile-ops", str(prof), "--json")
    profile = json.loads(prof.read_text())
    runtime = profile_order(profile, prefill=1)
    costs = CostTable.from_profile(profile)
    sim = simulate(policy, costs, n_layers=profile["n_layers"], n_tokens=len(PROMPT), chunk=3, threads=1)
    assert len(runtime) == len(build_graph(policy, profile["n_layers"], len(PROMPT), 3))
    assert sim.order == runtime


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("threads", [1, 2])
def test_simulated_tasks_run_once_after_inputs(policy, threads):
    chunk, n_tok, layers = 32, 512, 4
    base = {(s, "cpu"): 1e-3 for s in ("embed", "attn_in", "attention", "ffn_in", "swiglu", "head")}
    base |= {(s, "cpu"): 4e-3 for s in ("qkv", "o_proj", "gate_up", "down")}
    costs = CostTable(chunk, base).phone_like()
    run = simulate(policy, costs, n_layers=layers, n_tokens=n_tok, chunk=chunk, threads=threads, steal_threshold=2)
    tasks = build_graph(policy, layers, n_tok, chunk)
    assert sorted(run.order) == sorted((t.stage, t.layer, t.chunk) for t in tasks)
    assert len(set(run.order)) == len(run.order)
    end = {(t.stage, t.layer, t.chunk): e for t, _, _, e, _ in run.spans}
    start = {(t.stage, t.layer, t.chunk): s for t, _, s, _, _ in run.spans}
    for t in tasks:
        for n in t.next:
            nt = tasks[n]
            assert end[(t.stage, t.layer, t.chunk)] <= start[(nt.stage, nt.layer, nt.chunk)]
    stolen = [s for s in run.spans if s[4]]
    assert all(t.lane == "accel" and w == "cpu-0" for t, w, _, _, _ in stolen)
    if policy != "place+priority+steal" or threads == 1:
        assert not stolen
    # Workers never overlap themselves.
    for w in run.busy:
        mine = sorted((s, e) for _, v, s, e, _ in run.spans if v == w)
        assert all(a[1] <= b[0] + 1e-12 for a, b in zip(mine, mine[1:]))


def test_warm_costs_leave_out_the_cold_prefill():
    profile = {"chunk": 4, "tasks": [{"stage": "qkv", "lane": "accel", "chunk": 0, "stolen": False, "prefill": p,
                                      "t0": 0.0, "t1": t} for p, t in ((0, 9.0), (1, 1.0), (2, 3.0))]}
    assert CostTable.from_profile(profile).cost("qkv", "accel", 4) == 3.0  # all three: the median
    assert CostTable.from_profile(profile, warm=True).cost("qkv", "accel", 4) == 2.0
    assert CostTable.from_profile(profile, prefill=0).cost("qkv", "accel", 4) == 9.0
    with pytest.raises(ValueError, match="warm ones need --repeat-prefill"):
        CostTable.from_profile({"chunk": 4, "tasks": profile["tasks"][:1]}, warm=True)


def test_one_layer_simulation_leaves_out_the_embedding_and_head():
    """Figure 14 times one decoder layer: with one chunk the layer is a chain, so its latency is the stages' sum."""
    stages = ("embed", "attn_in", "qkv", "attention", "o_proj", "ffn_in", "gate_up", "swiglu", "down", "head")
    costs = CostTable(128, {(s, "cpu"): (i + 1) * 1e-3 for i, s in enumerate(stages)}).layers_only()
    run = simulate("place", costs, n_layers=1, n_tokens=128, chunk=128)
    assert run.makespan == pytest.approx(sum(range(2, 10)) * 1e-3)
    assert {t.stage for t, _, s, e, _ in run.spans if e > s} == set(stages[1:-1])


def test_pipeline_group_reaches_the_command_and_rows():
    from harness.config import ConfigError
    from harness.runner.job import prepare_job
    from harness.runner.sweep import compose_config
    from harness.systems.base import Prepared, get_system

    cfg = compose_config(["experiment=ttft", "system=edgeflow"])
    assert cfg.pipeline.name == "place+priority+steal"
    cfg = compose_config(["experiment=ttft", "system=edgeflow", "pipeline=llmnpu-static", "pipeline.steal_threshold=3",
                          "system.threads=4", "pipeline.accel_fraction=0.25"])
    job = prepare_job(cfg)
    assert job.row("ttft_s", 1.0, "s")["pipeline"] == "llmnpu-static"
    assert job.row("ttft_s", 1.0, "s")["variant"] == "chunk 128"  # policies compare only at one chunk size
    assert prepare_job(compose_config(["experiment=ttft", "system=edgeflow", "pipeline.chunk=32"])).row(
        "ttft_s", 1.0, "s")["variant"] == "chunk 32"
    system = get_system(cfg.system)
    system.configure(cfg)
    cmd = system.command(Prepared("edgeflow", [], {"binary": "edgeflow-run", "model": "m.efpk"}, "", []),
                         Workload.for_request([1, 2], 4))
    flags = dict(zip(cmd[2::2], cmd[3::2]))  # after the binary and the model: flag, value pairs
    assert flags["--policy"] == "llmnpu-static" and flags["--steal-threshold"] == "3"
    assert flags["--accel-threads"] == "1" and flags["--threads"] == "4"
    with pytest.raises(ConfigError, match="pipeline.name must be one of"):
        prepare_job(compose_config(["experiment=ttft", "system=edgeflow", "pipeline.name=fast"]))
    bad = compose_config(["experiment=ttft", "system=edgeflow", "pipeline.accel_threads=2"])
    with pytest.raises(ConfigError, match="accel_threads must be below system.threads"):
        get_system(bad.system).configure(bad)


def test_engine_metrics_map_lanes_and_operators():
    from harness.systems.edgeflow import engine_metrics

    report = {"ttft_s": 1.0, "bytes_read": 2e6, "peak_rss_bytes": 9e6, "tokens": [5], "ttft_breakdown_s": {"io": 0.1},
              "threads": 2, "io_threads": 1, "io_cpu_s": 0.004,
              "unpack_threads": 0, "cpu_threads": 1, "accel_threads": 1,
              "lanes": {"cpu": {"busy_s": 0.5, "idle_s": 0.5, "bubble_rate": 0.5, "stolen": 3},
                        "accel": {"busy_s": 0.9, "idle_s": 0.1, "bubble_rate": 0.1, "stolen": 0}, "span_s": 1.0},
              "op_s": {"qkv": 0.2}}

    class R:
        stdout = json.dumps(report)
        stderr = ""

    got = {m.name: m.value for m in engine_metrics(R())}
    assert got["edgeflow_cpu_bubble_rate"] == 0.5 and got["edgeflow_cpu_stolen_tasks"] == 3
    assert got["edgeflow_io_threads"] == 1 and got["edgeflow_unpack_threads"] == 0 and got["edgeflow_io_cpu_s"] == 0.004
    assert got["edgeflow_op_qkv_s"] == 0.2 and got["edgeflow_accel_idle_s"] == 0.1
