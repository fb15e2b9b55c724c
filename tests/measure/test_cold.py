"""The cold-start protocol against small fake engines (Python one-liners) on the local device."""
import subprocess
import sys
import time
from dataclasses import replace
from types import SimpleNamespace

import pytest

from harness.devices import get_device
from harness.devices.base import Device, cpu_busy_share
from harness.measure.cold import (EngineError, HostBusy, LoadReading, ProtocolConfig, gate_load, measured,
                                  read_load, repeat, run_once, summarize)

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


def test_output_read_late_still_counts(device, weights, monkeypatch):
    """A loaded host can starve the pipe readers until after the engine has exited: its token is still in the pipe,
    and is read to EOF within PIPE_DRAIN_S (once 5 s, hard-coded); a reader that takes longer is reported as such,
    never as an engine that printed nothing."""
    import harness.measure.cold as cold

    real_read, first_reads = cold.os.read, set()

    def starved_read(fd, n):  # each pipe's first read comes 1.5 s late: the engine printed and exited meanwhile
        if fd not in first_reads:
            first_reads.add(fd)
            time.sleep(1.5)
        return real_read(fd, n)

    monkeypatch.setattr(cold.os, "read", starved_read)
    prints = engine("sys.stdout.write('tok'); sys.stdout.flush()")
    run = run_once(device, prints, weights, lambda out: b"tok" in out, 10, QUIET)
    assert run.stdout == b"tok" and run.ttft_s <= run.exit_s
    monkeypatch.setattr(cold, "PIPE_DRAIN_S", 0.5)  # shorter than the starved reader takes
    first_reads.clear()
    with pytest.raises(EngineError, match="still being read 0.5 s after it exited"):
        run_once(device, prints, weights, lambda out: b"tok" in out, 10, QUIET)


def test_preloading_caches_the_prefix_before_the_spawn(device, tmp_path):
    f = tmp_path / "model.bin"
    f.write_bytes(b"\1" * (400 * 4096))
    protocol = ProtocolConfig(repetitions=1, warmup_runs=0, busy_policy="flag", preload_fraction=0.5)
    run = run_once(device, engine("print('tok')"), [str(f)], lambda out: b"tok" in out, 10, protocol)
    assert run.resident_before == pytest.approx(0.5, abs=0.01)
    assert run.preloaded_bytes == pytest.approx(200 * 4096, rel=0.02)
    with pytest.raises(ValueError, match=r"protocol.preload_fraction must be within \[0, 1\]"):
        ProtocolConfig(preload_fraction=1.5)


def fake_run(during: float | None = None, busy: bool = False):
    return SimpleNamespace(cpu_busy_during=during, host_busy=busy, notes=[])


def test_warmup_runs_are_discarded_and_not_gated(device, weights):
    calls = []
    runs = repeat(lambda p: calls.append(p.busy_signal) or fake_run(len(calls) / 100),
                  ProtocolConfig(repetitions=3, warmup_runs=2))
    assert [r.cpu_busy_during for r in runs] == [0.03, 0.04, 0.05]
    assert calls == ["none", "none", "cpu", "cpu", "cpu"]
    reading = read_load(device, ProtocolConfig(busy_signal="none"))  # no sampling: the load average, never busy
    assert reading.cpu_busy is None and not reading.busy and reading.load_avg >= 0


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
    """A device whose load readings (1-minute average and CPU-busy share alike) come from a script."""

    def __init__(self, loads, cpu=(0.0,)):
        self.loads, self.cpu = list(loads), list(cpu)

    def load_average(self):
        return self.loads.pop(0) if len(self.loads) > 1 else self.loads[0]

    def cpu_busy(self, window_s):
        return self.cpu.pop(0) if len(self.cpu) > 1 else self.cpu[0]


def test_busy_host_is_refused_flagged_or_waited_for_by_its_load_average():
    lagging = dict(busy_signal="loadavg")
    with pytest.raises(HostBusy, match="load average 4.00 > protocol.max_load=1.5"):
        gate_load(BusyHost([4.0]), ProtocolConfig(busy_policy="refuse", **lagging))
    assert gate_load(BusyHost([4.0]), ProtocolConfig(busy_policy="flag", **lagging)) == LoadReading(4.0, None, True)
    waited = gate_load(BusyHost([4.0, 0.5]), ProtocolConfig(busy_policy="wait", busy_wait_s=0.01, **lagging))
    assert waited == LoadReading(0.5, None, False)
    assert gate_load(BusyHost([0.2]), ProtocolConfig(busy_policy="refuse", **lagging)) == LoadReading(0.2, None, False)


def test_the_cpu_gate_asks_what_runs_now_not_the_minutes_average():
    """A load average still high from work that has ended does not hold a run back; CPUs busy now do."""
    now = dict(busy_signal="cpu")
    assert gate_load(BusyHost([1.9], cpu=[0.03]), ProtocolConfig(busy_policy="refuse", **now)) == \
        LoadReading(1.9, 0.03, False)
    with pytest.raises(HostBusy, match="80% of the CPUs busy over 0.5 s > protocol.max_cpu_busy=0.25"):
        gate_load(BusyHost([0.1], cpu=[0.8]), ProtocolConfig(busy_policy="refuse", **now))
    waited = gate_load(BusyHost([1.2], cpu=[0.9, 0.6, 0.1]), ProtocolConfig(busy_policy="wait", busy_wait_s=3, **now))
    assert waited == LoadReading(1.2, 0.1, False)
    # cpu_during checks during the run instead: nothing is sampled before it
    during = ProtocolConfig(busy_policy="refuse", busy_signal="cpu_during")
    assert gate_load(BusyHost([1.9], cpu=[0.8]), during) == LoadReading(1.9, None, False)


def test_a_run_that_shared_the_cpus_is_measured_again_behind_the_gate():
    signals = []
    runs = iter([fake_run(0.6, busy=True), fake_run(None)])
    during = ProtocolConfig(busy_signal="cpu_during")
    again = measured(lambda p: signals.append(p.busy_signal) or next(runs), during)
    assert signals == ["cpu_during", "cpu"] and "shared 60% of the CPUs" in again.notes[0]
    clean = measured(lambda p: fake_run(0.02), during)
    assert clean.cpu_busy_during == 0.02 and not clean.notes
    flagged = measured(lambda p: fake_run(0.6, busy=True), replace(during, busy_policy="flag"))
    assert flagged.host_busy and flagged.cpu_busy_during == 0.6  # kept, and its rows say host_busy


def test_other_work_during_a_run_counts_and_the_runs_own_does_not(device, weights):
    """The run's own CPU time (a busy engine) is not other work; a process spinning beside it is."""
    protocol = ProtocolConfig(busy_policy="flag", busy_signal="cpu_during")
    spin = "t = time.time()\nwhile time.time() - t < 0.6: pass\nprint('tok')"
    alone = run_once(device, engine(spin), weights, lambda out: b"tok" in out, 10, protocol)
    assert alone.cpu_busy is None and 0.0 <= alone.cpu_busy_during <= 1.0
    others = [subprocess.Popen(engine("t = time.time()\nwhile time.time() - t < 3: pass")) for _ in range(2)]
    try:
        shared = run_once(device, engine("time.sleep(0.8); print('tok')"), weights, lambda out: b"tok" in out, 10,
                          protocol)
    finally:
        for p in others:
            p.kill()
            p.wait()
    assert shared.cpu_busy_during > 0.5 and shared.host_busy  # two spinners on this host's CPUs


def test_cpu_busy_share_reads_proc_stat(device):
    before = "cpu  100 0 50 800 50 0 0 0 0 0"
    after = "cpu  160 0 70 900 50 0 0 20 0 0"  # +200 jiffies: 60 user, 20 system, 100 idle, 20 steal
    assert cpu_busy_share(before, after) == pytest.approx(0.5)
    assert cpu_busy_share(before, before) == 0.0
    with pytest.raises(ValueError, match="not /proc/stat's cpu line"):
        cpu_busy_share("cpu0 1 2 3", after)
    assert 0.0 <= device.cpu_busy(0.1) <= 1.0
    assert 0.0 <= Device.cpu_busy(device, 0.1) <= 1.0  # through the device's shell, as a phone reads it


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
