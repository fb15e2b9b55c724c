"""The cold-start protocol against small fake engines (Python one-liners) on the local device."""
import sys

import pytest

from harness.devices import get_device
from harness.measure.cold import (EngineError, HostBusy, ProtocolConfig, gate_load, repeat, run_once, summarize)

QUIET = ProtocolConfig(repetitions=2, warmup_runs=1, busy_policy="flag")


def engine(code: str) -> list[str]:
    return [sys.executable, "-c", f"import sys, time\n{code}"]


@pytest.fixture
def device():
    return get_device({"name": "local"})


@pytest.fixture
def weights(tmp_path):
    f = tmp_path / "model.bin"
    f.write_bytes(b"\0" * 100_000)
    f.read_bytes()
    return [str(f)]


def test_ttft_is_spawn_to_first_token_bytes(device, weights):
    code = "time.sleep(0.3); sys.stdout.write('tok'); sys.stdout.flush(); time.sleep(0.3)"
    run = run_once(device, engine(code), weights, lambda out: b"tok" in out, 10, QUIET)
    assert 0.3 <= run.ttft_s < run.exit_s
    assert run.exit_s >= 0.6
    assert run.resident_before == 0.0  # the model file was evicted before the spawn
    assert run.peak_rss_kb > 0 and run.rss_timeline
    assert (run.energy_j is None) == (run.energy_reason is not None)


def test_preloading_caches_the_prefix_before_the_spawn(device, tmp_path):
    f = tmp_path / "model.bin"
    f.write_bytes(b"\1" * (400 * 4096))
    protocol = ProtocolConfig(repetitions=1, warmup_runs=0, busy_policy="flag", preload_fraction=0.5)
    run = run_once(device, engine("print('tok')"), [str(f)], lambda out: b"tok" in out, 10, protocol)
    assert run.resident_before == pytest.approx(0.5, abs=0.01)
    assert run.preloaded_bytes == pytest.approx(200 * 4096, rel=0.02)
    with pytest.raises(ValueError, match=r"protocol.preload_fraction must be within \[0, 1\]"):
        ProtocolConfig(preload_fraction=1.5)


def test_warmup_runs_are_discarded(device, weights):
    calls = []
    runs = repeat(lambda: calls.append(1) or len(calls), ProtocolConfig(repetitions=3, warmup_runs=2))
    assert runs == [3, 4, 5] and len(calls) == 5


@pytest.mark.parametrize("code,message", [
    ("sys.stderr.write('segfault in ggml\\n'); sys.exit(3)", "exited with status 3"),
    ("sys.stderr.write('segfault in ggml\\n'); time.sleep(30)", "timed out after 1"),
    ("sys.stderr.write('segfault in ggml\\n'); print('nothing useful')", "without printing a first token"),
])
def test_engine_failures_raise_with_the_stderr_tail(device, weights, code, message):
    with pytest.raises(EngineError, match=message) as err:
        run_once(device, engine(code), weights, lambda out: b"tok" in out, 1, QUIET)
    assert "segfault in ggml" in str(err.value) and "segfault in ggml" in err.value.stderr_tail


class BusyHost:
    def __init__(self, loads):
        self.loads = list(loads)

    def load_average(self):
        return self.loads.pop(0) if len(self.loads) > 1 else self.loads[0]


def test_busy_host_is_refused_flagged_or_waited_for():
    with pytest.raises(HostBusy, match="load average 4.00 > protocol.max_load=1.5"):
        gate_load(BusyHost([4.0]), ProtocolConfig(busy_policy="refuse"))
    assert gate_load(BusyHost([4.0]), ProtocolConfig(busy_policy="flag")) == (4.0, True)
    assert gate_load(BusyHost([4.0, 0.5]), ProtocolConfig(busy_policy="wait", busy_wait_s=0.01)) == (0.5, False)
    assert gate_load(BusyHost([0.2]), ProtocolConfig(busy_policy="refuse")) == (0.2, False)


def test_config_errors_name_the_key():
    with pytest.raises(ValueError, match="protocol.repetitions"):
        ProtocolConfig(repetitions=0)
    with pytest.raises(ValueError, match="protocol.busy_policy"):
        ProtocolConfig(busy_policy="ignore")


def test_summary_is_median_and_spread():
    s = summarize([1.0, 2.0, 4.0])
    assert s == {"median": 2.0, "min": 1.0, "max": 4.0, "n": 3, "spread_pct": 150.0}


def test_eviction_is_refused_while_another_process_maps_the_file(device, weights, monkeypatch):
    import functools
    import mmap

    from harness.measure import cold

    monkeypatch.setattr(cold, "evict_verified", functools.partial(cold.evict_verified, pause_s=0.01))
    with open(weights[0], "rb") as f, mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as m:
        sum(m[i] for i in range(0, len(m), mmap.PAGESIZE))  # mapped and faulted in: fadvise cannot drop these pages
        with pytest.raises(RuntimeError, match="another process probably has them mapped"):
            run_once(device, engine("print('tok')"), weights, lambda out: b"tok" in out, 5, QUIET)
