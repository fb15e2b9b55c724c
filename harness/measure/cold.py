"""The cold-start protocol, shared by every system under test (llama.cpp, MNN, llm.npu, EdgeFlow).

One repetition:
  1. load gate: is the device busy with other work? `protocol.busy_signal` cpu (default): the share of all CPUs'
     time spent off idle (steal included) over the `protocol.busy_window_s` just before the run, against
     `protocol.max_cpu_busy`; cpu_during: the share of all CPUs' time that went to anything but the run itself
     *during* the run (/proc/stat at spawn and after exit, less the run's own CPU time and this process's), a run above
     it measured again behind the cpu gate (on a device that cannot attribute CPU time to a run, a phone, cpu_during
     gates as cpu does). cpu_during saves the gate's half second per run but starts runs on CPUs that were busy a
     moment before, and that is another cold state: EdgeFlow's TTFT 12% and llama.cpp's 3.5% lower than after the
     gate's idle half second (docs/methodology.md); loadavg: the 1-minute load average against
     `protocol.max_load`, which lags: after a job of the harness's own ends it stays high for a minute while the CPUs
     are already idle (the gate then waited out the previous point's load before every timed point). Refuse, wait,
     or flag the row; the readings are rows;
     thermal gate: wait until the hottest CPU zone is at most `device.max_temp_c` (up to `device.thermal_wait_s`,
     then refuse), where the device reads temperatures (a phone: 40 C by default; this host: off);
  2. evict every model file from the page cache and verify residency (<= `protocol.max_resident_fraction`); with
     `protocol.preload_fraction` > 0 (Figure 2: an app that prefetches its model), then read the first fraction of
     every model file back into the cache, outside any flash throttle, and verify that fraction is resident;
  3. spawn a fresh process (under flash emulation when the device has it) and start the clock at spawn;
  4. read its stdout unbuffered; the system's `first_token(buffer)` says when the first generated token is there, and
     the wall-clock time of the read that completed it is TTFT (primary metric);
  5. sample VmRSS/VmHWM from /proc/PID/status every `protocol.rss_sample_ms` (timeline) and take the kernel's peak
     (wait4 ru_maxrss) after exit; energy over spawn -> first token where the device has a counter (a host: RAPL
     through powercap, read beside the memory samples for a power timeline). A device that
     samples on itself (a phone: one sampler process per run, harness/devices/android.py) hands back its samples
     after exit instead: memory (RSS, PSS), battery power integrated over [0, TTFT] on its clock, temperatures;
  6. a timeout, a non-zero exit or a missing first token raises EngineError carrying the stderr tail.
Warm-up: `protocol.warmup_runs` extra cold runs first whose results are discarded. They warm what is not a model file
(the engine's binary, shared libraries, the Python interpreter) identically for every system; model files are evicted
again before every measured run. The warm-ups skip the load gate (step 1): nothing they measure is kept.
"""
from __future__ import annotations

import os
import statistics
import subprocess
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Callable


# cpu_during: checked over the run itself; cpu: gated over busy_window_s before it; loadavg: the 1-min load average;
# none: no gate (what the discarded warm-up runs get)
BUSY_SIGNALS = ("cpu_during", "cpu", "loadavg", "none")
# After an engine exits, how long its pipes' readers may take to reach EOF (the limit is for a grandchild that keeps a
# pipe open). It was 5 s: a `make test` beside other work once saw llama.cpp exit 0 with no first token read and only
# two lines of its stderr, which readers starved past that limit explain.
PIPE_DRAIN_S = 60.0


@dataclass
class ProtocolConfig:
    """conf/protocol/cold.yaml."""

    repetitions: int = 3
    warmup_runs: int = 1  # discarded cold runs before the measured ones (see module docstring)
    busy_signal: str = "cpu"  # BUSY_SIGNALS: CPU time used by anything over busy_window_s before the run, ...
    max_cpu_busy: float = 0.25  # share of all CPUs busy (0..1) above which the device counts as busy
    busy_window_s: float = 0.5
    max_load: float = 1.5  # 1-minute load average above which the host is busy (busy_signal=loadavg)
    busy_policy: str = "wait"  # refuse | wait (up to busy_wait_s, then refuse) | flag (run, mark rows host_busy=1)
    busy_wait_s: float = 120.0
    max_resident_fraction: float = 0.01  # of the model files' pages, after eviction
    rss_sample_ms: float = 10.0
    preload_fraction: float = 0.0  # of each model file's bytes (a prefix) cached again after eviction (Figure 2)

    def __post_init__(self):
        checks = [
            ("repetitions", 1 <= self.repetitions <= 1000, "an integer in [1, 1000]"),
            ("warmup_runs", 0 <= self.warmup_runs <= 100, "an integer in [0, 100]"),
            ("busy_signal", self.busy_signal in BUSY_SIGNALS, f"one of {', '.join(BUSY_SIGNALS)}"),
            ("max_cpu_busy", 0 < self.max_cpu_busy <= 1, "within (0, 1]"),
            ("busy_window_s", 0.05 <= self.busy_window_s <= 10, "within [0.05, 10] s"),
            ("max_load", self.max_load > 0, "> 0"),
            ("busy_policy", self.busy_policy in ("refuse", "wait", "flag"), "one of refuse, wait, flag"),
            ("busy_wait_s", self.busy_wait_s >= 0, ">= 0"),
            ("max_resident_fraction", 0 <= self.max_resident_fraction <= 1, "within [0, 1]"),
            ("rss_sample_ms", 1 <= self.rss_sample_ms <= 1000, "within [1, 1000] ms"),
            ("preload_fraction", 0 <= self.preload_fraction <= 1, "within [0, 1]"),
        ]
        for key, ok, allowed in checks:
            if not ok:
                raise ValueError(f"protocol.{key} must be {allowed}, got {getattr(self, key)!r}")


class EngineError(RuntimeError):
    """An engine crashed, hung or printed something unparseable. The message ends with its stderr tail."""

    def __init__(self, what: str, stderr: bytes | str = b"", tail_chars: int = 2000):
        text = stderr.decode("utf-8", "replace") if isinstance(stderr, bytes) else stderr
        self.stderr_tail = text[-tail_chars:]
        super().__init__(f"{what}\n--- stderr tail ---\n{self.stderr_tail}" if self.stderr_tail else what)


class HostBusy(RuntimeError):
    """The device stayed busy (protocol.busy_signal above its threshold)."""


class DeviceHot(RuntimeError):
    """The device stayed hotter than device.max_temp_c for device.thermal_wait_s."""


@dataclass
class ColdRun:
    """What one cold repetition observed. Times are seconds from spawn."""

    ttft_s: float
    exit_s: float
    stdout: bytes
    stderr: bytes
    peak_rss_kb: int | None
    rss_timeline: list[tuple[float, int]]  # (seconds from spawn, VmRSS kB)
    bytes_read: int | None
    resident_before: float
    load_avg: float
    host_busy: bool
    energy_j: float | None
    energy_reason: str | None = None
    notes: list[str] = field(default_factory=list)
    pss_timeline: list[tuple[float, int]] = field(default_factory=list)  # (seconds from spawn, Pss kB)
    power_timeline: list[tuple[float, float]] = field(default_factory=list)  # (seconds from spawn, W)
    avg_power_w: float | None = None  # mean power over [0, TTFT]
    temp_before_c: float | None = None  # hottest CPU zone at the thermal gate
    temp_peak_c: float | None = None  # hottest reading during the run
    sample_rate_hz: float | None = None  # of the device's sampler
    thermal_reason: str | None = None
    preloaded_bytes: int | None = None  # with protocol.preload_fraction > 0: model bytes in the cache at spawn
    cpu_busy: float | None = None  # share of the device's CPUs busy just before the run (busy_signal=cpu)
    cpu_busy_during: float | None = None  # share of its CPUs' time other work took during the run (cpu_during)


@dataclass(frozen=True)
class LoadReading:
    load_avg: float  # 1-minute load average
    cpu_busy: float | None  # share of all CPUs busy over protocol.busy_window_s (busy_signal=cpu), else None
    busy: bool  # above the protocol's threshold (the rows' host_busy when busy_policy=flag)

    def describe(self, protocol: "ProtocolConfig") -> str:
        if self.cpu_busy is None:
            return f"1-minute load average {self.load_avg:.2f} > protocol.max_load={protocol.max_load}"
        return (f"{self.cpu_busy:.0%} of the CPUs busy over {protocol.busy_window_s:g} s > "
                f"protocol.max_cpu_busy={protocol.max_cpu_busy:g}")


def read_load(device, protocol: ProtocolConfig) -> LoadReading:
    """The gate's reading before a run (busy_signal cpu_during has none: its check comes after the run)."""
    load = device.load_average()
    if protocol.busy_signal in ("none", "cpu_during"):
        return LoadReading(load, None, False)
    if protocol.busy_signal == "loadavg":
        return LoadReading(load, None, load > protocol.max_load)
    share = device.cpu_busy(protocol.busy_window_s)
    return LoadReading(load, share, share > protocol.max_cpu_busy)


def gate_load(device, protocol: ProtocolConfig) -> LoadReading:
    """The device's load after applying the busy policy; raises HostBusy when the run is refused."""
    reading = read_load(device, protocol)
    if not reading.busy or protocol.busy_policy == "flag":
        return reading
    if protocol.busy_policy == "wait":
        deadline = time.monotonic() + protocol.busy_wait_s
        while time.monotonic() < deadline:
            time.sleep(min(1.0, protocol.busy_wait_s))
            reading = read_load(device, protocol)
            if not reading.busy:
                return reading
    raise HostBusy(f"host busy: {reading.describe(protocol)} (busy_policy={protocol.busy_policy}); retry when the "
                   "machine is idle or raise the threshold")


def gate_thermal(device, poll_s: float = 1.0) -> tuple[float | None, str | None]:
    """(temperature before the run, None) once the device is cool enough, or (None, why no reading); raises
    DeviceHot after device.thermal_wait_s."""
    temp, reason = device.temperature_c()
    limit, wait_s = device.cfg.max_temp_c, device.cfg.thermal_wait_s
    if temp is None or limit is None:
        return temp, reason
    deadline = time.monotonic() + wait_s
    while temp > limit:
        if time.monotonic() >= deadline:
            raise DeviceHot(f"device still at {temp:.1f} C > device.max_temp_c={limit} after {wait_s:.0f} s "
                            f"(device.thermal_wait_s); let it cool or raise the limit")
        time.sleep(min(poll_s, max(0.05, deadline - time.monotonic())))
        temp, _ = device.temperature_c()
        if temp is None:
            return None, "the temperature reading went away during the thermal gate"
    return temp, None


def evict_verified(device, files: list[str], protocol: ProtocolConfig, tries: int = 5, pause_s: float = 2.0) -> float:
    """Evict and check residency; retried a few times, since pages that another process has mapped or is reading
    cannot be dropped until it lets go."""
    for attempt in range(tries):
        resident = device.evict(files)
        if resident <= protocol.max_resident_fraction:
            return resident
        if attempt + 1 < tries:
            time.sleep(pause_s)
    raise RuntimeError(f"eviction failed: {resident:.1%} of the model files' pages are still cached after {tries} "
                       f"evictions (allowed {protocol.max_resident_fraction:.1%}); another process probably has them "
                       f"mapped or is reading them (see `fuser {files[0]}`); files: {files}")


def preload_verified(device, files: list[str], fraction: float, slack: float = 0.01) -> float:
    """After eviction: the first `fraction` of every file read back into the page cache; returns the resident
    fraction, which must lie within `slack` of the request (readahead is off for the prefix reads)."""
    resident = device.preload(files, fraction)
    if abs(resident - fraction) > slack:
        raise RuntimeError(f"preloading {fraction:.0%} of the model files left {resident:.1%} of their pages cached "
                           f"(allowed +-{slack:.0%}); another process may be reading them; files: {files}")
    return resident


def others_share(before, after, own_cpu_s: float) -> float:
    """Share of all CPUs' time between two CpuJiffies snapshots that went to anything but `own_cpu_s` seconds of
    the run's own (its process tree and the harness process that timed it). Ticks are 10 ms: over a 0.15 s run on 2
    CPUs (30 ticks) the share is known to about +-0.1."""
    tick = os.sysconf("SC_CLK_TCK")
    total_s = (after.total - before.total) / tick
    return 0.0 if total_s <= 0 else min(1.0, max(0.0, ((after.busy - before.busy) / tick - own_cpu_s) / total_s))


def run_once(device, cmd: list[str], files: list[str], first_token: Callable[[bytes], bool], timeout_s: float,
             protocol: ProtocolConfig, env: dict | None = None, cwd: str | None = None) -> ColdRun:
    """One cold repetition of `cmd` (see the module docstring)."""
    check_during = protocol.busy_signal == "cpu_during" and device.cpu_jiffies() is not None
    if protocol.busy_signal == "cpu_during" and not check_during:
        protocol = replace(protocol, busy_signal="cpu")  # the device cannot attribute CPU time: gate before
    load = gate_load(device, protocol)
    temp_before, thermal_reason = gate_thermal(device)
    resident = evict_verified(device, files, protocol)
    preloaded = None
    if protocol.preload_fraction > 0:
        resident = preload_verified(device, files, protocol.preload_fraction)
        preloaded = round(resident * device.file_bytes(files))
    read_energy, energy_reason = device.power_source()
    e0 = read_energy() if read_energy else None

    jiffies0, own0 = (device.cpu_jiffies(), _own_cpu_s()) if check_during else (None, 0.0)
    t0 = time.monotonic()
    proc = device.spawn(cmd, env=env, cwd=cwd)
    out, err = bytearray(), bytearray()
    first = {}  # "t": monotonic time of the read that completed the first token, "e": energy then

    def read_stdout():
        fd = proc.stdout.fileno()
        while chunk := os.read(fd, 65536):
            out.extend(chunk)
            if "t" not in first and first_token(bytes(out)):
                first["t"] = time.monotonic()
                first["e"] = read_energy() if read_energy else None

    def read_stderr():
        fd = proc.stderr.fileno()
        while chunk := os.read(fd, 65536):
            err.extend(chunk)

    timeline: list[tuple[float, int]] = []
    energy_samples: list[tuple[float, float]] = []  # (seconds from spawn, joules) where the device has a counter
    hwm = {"kb": 0}  # the process's own VmHWM, sampled
    stop = threading.Event()

    def sample():
        if getattr(device, "samples_on_device", False):
            return  # the device samples itself; see on_device_samples
        while not stop.is_set():
            mem = device.sample_memory(proc.pid)
            if mem:
                timeline.append((time.monotonic() - t0, mem["rss_kb"]))
                hwm["kb"] = max(hwm["kb"], mem.get("hwm_kb", 0))
            if read_energy and "t" not in first:
                energy_samples.append((time.monotonic() - t0, read_energy()))
            stop.wait(protocol.rss_sample_ms / 1000)

    threads = [threading.Thread(target=f, daemon=True) for f in (read_stdout, read_stderr, sample)]
    for t in threads:
        t.start()
    try:
        code = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise EngineError(f"{cmd[0]} timed out after {timeout_s} s (system.timeout_s)", bytes(err)) from None
    finally:
        stop.set()
    t_exit = time.monotonic()
    for t in threads[:2]:  # the pipes hold the rest of its output: read to EOF (a loaded host can starve the readers)
        t.join(timeout=PIPE_DRAIN_S)
    undrained = any(t.is_alive() for t in threads[:2])
    during = None
    if jiffies0 is not None and proc.cpu_seconds() is not None:
        during = others_share(jiffies0, device.cpu_jiffies(), proc.cpu_seconds() + _own_cpu_s() - own0)
    if code != 0:
        raise EngineError(f"{cmd[0]} exited with status {code}", bytes(err))
    if "t" not in first:
        late = f" (its output was still being read {PIPE_DRAIN_S:g} s after it exited)" if undrained else ""
        raise EngineError(f"{cmd[0]} exited without printing a first token{late}; stdout: {bytes(out)[-300:]!r}",
                          bytes(err))
    energy = first["e"] - e0 if read_energy else None
    # An engine that prints its token and exits at once can be seen exiting (wait() returns) before the reader thread
    # runs and sees the token: it was written before the exit, so the exit's time bounds it.
    run = ColdRun(ttft_s=min(first["t"], t_exit) - t0, exit_s=t_exit - t0, stdout=bytes(out), stderr=bytes(err),
                  # The sampled VmHWM first: wait4's ru_maxrss also counts the pages of the (v)forking parent
                  # before exec, i.e. this Python process (seen: 1.5 GB for a 176 MB engine after quantizing).
                  peak_rss_kb=hwm["kb"] or proc.peak_rss_kb() or max((r for _, r in timeline), default=None),
                  rss_timeline=timeline, bytes_read=proc.bytes_read(), resident_before=resident,
                  load_avg=load.load_avg, cpu_busy=load.cpu_busy, cpu_busy_during=during,
                  host_busy=load.busy or (during is not None and during > protocol.max_cpu_busy),
                  energy_j=energy, energy_reason=energy_reason, temp_before_c=temp_before,
                  thermal_reason=thermal_reason, preloaded_bytes=preloaded)
    if energy is not None and run.ttft_s > 0:
        run.avg_power_w = energy / run.ttft_s
        # Mean power between consecutive counter readings (a counter updates every ~1 ms; readings ~10 ms apart).
        pts = [(0.0, e0), *energy_samples, (run.ttft_s, first["e"])]
        run.power_timeline = [((ta + tb) / 2, (eb - ea) / (tb - ta)) for (ta, ea), (tb, eb) in zip(pts, pts[1:])
                              if tb - ta > 1e-3]
    samples = proc.samples() if hasattr(proc, "samples") else None
    if samples is not None:
        on_device_samples(run, samples, device)
    return run


def on_device_samples(run: ColdRun, samples, device) -> None:
    """Fill a run's memory, power and temperature from the device's own sampler (times on its clock, 0 = spawn)."""
    from harness.devices.sampling import celsius, coverage, energy_joules, power_series

    run.rss_timeline = [(t, r) for t, r in zip(samples.t, samples.rss_kb) if r is not None]
    run.pss_timeline = [(t, p) for t, p in zip(samples.t, samples.pss_kb) if p is not None]
    hwm = [h for h in samples.hwm_kb if h is not None]
    run.peak_rss_kb = max(hwm) if hwm else max((r for _, r in run.rss_timeline), default=None)
    run.sample_rate_hz = samples.rate_hz
    cfg = device.cfg
    power, reason = power_series(samples, cfg.current_unit, cfg.voltage_unit, cfg.current_sign)
    status = device.info().get("battery_status", "")
    if status in ("Charging", "Full"):
        power, reason = None, (f"battery {status.lower()} (on USB power the battery current is net of the charger, "
                               f"not the phone's consumption): unplug and use adb over Wi-Fi")
    if power is None:
        run.energy_j, run.energy_reason = None, reason
    else:
        run.power_timeline = list(zip(power.t, power.watts))
        run.energy_j = energy_joules(power, 0.0, run.ttft_s)
        covered = coverage(power, 0.0, run.ttft_s)
        run.energy_reason = None if run.energy_j is not None else (
            f"the sampler's samples cover {covered:.0%} of the cold start (< 50%): too short for its period")
        if run.energy_j is not None:
            run.avg_power_w = run.energy_j / run.ttft_s
        run.notes.append(f"power: {power.how}; samples cover {covered:.0%} of the cold start, the edges held")
    temps = [celsius(v) for name, vals in samples.temps_raw.items() if name != "battery" for v in vals]
    temps = [v for v in temps if v is not None]  # CPU zones only: the battery warms slowly and lags
    run.temp_peak_c = max(temps) if temps else None


def _own_cpu_s() -> float:
    """This process's CPU time so far, every thread (the readers and the sampler of a run among them)."""
    t = os.times()
    return t.user + t.system


def repeat(run: Callable[[ProtocolConfig], ColdRun], protocol: ProtocolConfig) -> list[ColdRun]:
    """Warm-up runs (discarded) then `protocol.repetitions` measured runs of the same cold repetition; `run` takes
    the protocol of its run. The warm-ups skip the busy gate (busy_signal none): what they measure is thrown away."""
    for _ in range(protocol.warmup_runs):
        run(replace(protocol, busy_signal="none"))
    return [measured(run, protocol) for _ in range(protocol.repetitions)]


def measured(run: Callable[[ProtocolConfig], ColdRun], protocol: ProtocolConfig) -> ColdRun:
    """One measured run; under busy_signal cpu_during, a run that shared the CPUs beyond protocol.max_cpu_busy is
    measured again behind the cpu gate (which waits or refuses by busy_policy; flag keeps the run, flagged)."""
    first = run(protocol)
    if first.cpu_busy_during is None or not first.host_busy or protocol.busy_policy == "flag":
        return first
    again = run(replace(protocol, busy_signal="cpu"))
    again.notes.append(f"measured again behind the cpu gate: the first run shared {first.cpu_busy_during:.0%} of "
                       f"the CPUs with other work (> protocol.max_cpu_busy={protocol.max_cpu_busy:g})")
    return again


def summarize(values: list[float]) -> dict:
    """Median and spread (min, max, and (max - min) / median) of repetitions."""
    med = statistics.median(values)
    return {"median": med, "min": min(values), "max": max(values), "n": len(values),
            "spread_pct": 100 * (max(values) - min(values)) / med if med else 0.0}
