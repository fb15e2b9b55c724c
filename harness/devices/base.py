"""Devices: where a system under test runs. One small contract, one module per device, a registry.

A device runs commands and measured processes, moves files, evicts files from its page cache and reports their
residency, samples a process's memory, says where power can be read (or why not), and describes itself for provenance.
`flash_read_mbps` (None = native) emulates slower storage for every system alike; rows carry it as
`flash_emulated_mbps`.

Contract (what the cold-start protocol in harness/measure/cold.py relies on):
- `spawn(cmd, env, cwd)` starts a measured process and returns a `Spawned`: stdout/stderr as unbuffered byte
  pipes, `wait(timeout)`, `kill()`, and after exit its peak RSS from the kernel where the device can give it.
- `evict(paths)` drops the files from the page cache and returns the resident fraction measured afterwards;
  `resident_fraction(paths)` measures it alone (0.0 = nothing cached).
- `sample_memory(pid)` returns {"rss_kb", "hwm_kb"} from /proc/PID/status, or None once the process is gone.
- `power_source()` returns (reader, None) or (None, reason): never a made-up number.
- `temperature_c()` returns (degrees C of the hottest CPU zone, None) or (None, reason): the thermal gate.
- A device that samples on itself (android: one sampler process per run) returns the run's `Samples` from
  `Spawned.samples()` after exit; the protocol then takes memory, power and temperature from them instead of
  polling `sample_memory` from the host.
- `timing_label` / `sensor_label`: what the device's timings and its power/temperature readings are (measured,
  emulated, stand-in), carried into every row.
- Paths passed to evict/resident_fraction/spawn are paths on the device (see `push`).
"""
from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Callable, Protocol

from harness.registry import Registry


@dataclass
class DeviceConfig:
    """The keys of conf/device/*.yaml every device has; a device with more declares its own subclass as its
    `config_type` (android: AndroidConfig). `flash_read_mbps`: null = native storage speed, else an emulated read
    rate in MB/s."""

    name: str = "local"
    # Which device of its type this is (+device.id=phone-a): the key of its exclusive-use lock (harness/devices/
    # lock.py) and the `device` column of its rows. null: the type name in rows, the host or adb address as the key.
    id: str | None = None
    flash_read_mbps: float | None = None
    max_temp_c: float | None = None  # thermal gate before each timed run (null: off; conf/device/android.yaml: 40)
    thermal_wait_s: float = 300.0  # how long the gate waits for the device to cool, then the run fails

    def __post_init__(self):
        if self.name not in DEVICES:  # (the registry imports harness.devices.<name> when it exists)
            DEVICES.load_all("device")  # so that the message lists every device
            raise ValueError(f"device.name must be one of {sorted(DEVICES)}, got {self.name!r}")
        if self.id is not None and not re.fullmatch(r"[\w.@:+-]{1,100}", str(self.id)):
            raise ValueError(f"device.id must be 1-100 letters, digits or . _ @ : + -, got {self.id!r}")
        if self.flash_read_mbps is not None and not (1 <= float(self.flash_read_mbps) <= 100_000):
            raise ValueError(f"device.flash_read_mbps must be null or within [1, 100000] MB/s, got {self.flash_read_mbps}")
        self.check([
            ("max_temp_c", self.max_temp_c is None or 0 < float(self.max_temp_c) < 150, "null or within (0, 150) C"),
            ("thermal_wait_s", float(self.thermal_wait_s) >= 0, ">= 0 s")])

    def check(self, checks: list[tuple[str, bool, str]]) -> None:
        """(key, ok, allowed) triples: the first failing one is a ValueError naming device.<key>."""
        for key, ok, allowed in checks:
            if not ok:
                raise ValueError(f"device.{key} must be {allowed}, got {getattr(self, key)!r}")


class Spawned(Protocol):
    pid: int
    stdout: object  # binary stream, unbuffered
    stderr: object

    def wait(self, timeout: float | None = None) -> int: ...
    def kill(self) -> None: ...
    def peak_rss_kb(self) -> int | None: ...  # kernel-reported peak (wait4 ru_maxrss) after exit, None if unknown
    def cpu_seconds(self) -> float | None: ...  # user + system time, threads and reaped children; None if unknown
    def bytes_read(self) -> int | None: ...  # bytes read from storage during the run, None if unknown
    def samples(self): ...  # harness.devices.sampling.Samples taken on the device, or None (host-side polling)


@dataclass
class Completed:
    returncode: int
    stdout: str
    stderr: str


class Device(ABC):
    """A machine that runs systems under test. See the module docstring for the contract."""

    name: str = ""

    def __init__(self, cfg: DeviceConfig):
        self.cfg = cfg

    @property
    def flash_read_mbps(self) -> float | None:
        return self.cfg.flash_read_mbps

    @property
    def timing_label(self) -> str:
        return "emulated" if self.flash_read_mbps is not None else "measured"

    @property
    def sensor_label(self) -> str:
        return "measured"

    def temperature_c(self) -> tuple[float | None, str | None]:
        """(hottest CPU thermal zone in degrees C, None), or (None, why not)."""
        return None, f"device {self.name} reads no temperature"

    @abstractmethod
    def run(self, cmd: list[str], env: dict | None = None, timeout: float | None = None, cwd: str | None = None) -> Completed:
        """Run a command to completion (not measured)."""

    @abstractmethod
    def spawn(self, cmd: list[str], env: dict | None = None, cwd: str | None = None) -> Spawned:
        """Start a measured process, subject to flash emulation."""

    @abstractmethod
    def push(self, local: str, remote: str) -> str:
        """Make a local file available on the device; returns its path there."""

    @abstractmethod
    def pull(self, remote: str, local: str) -> str:
        """Copy a file from the device; returns the local path."""

    @abstractmethod
    def evict(self, paths: list[str]) -> float:
        """Drop the files from the page cache; returns the resident fraction measured afterwards."""

    @abstractmethod
    def resident_fraction(self, paths: list[str]) -> float:
        """Fraction of the files' pages in the page cache."""

    def preload(self, paths: list[str], fraction: float) -> float:
        """Read the first `fraction` of each file's bytes into the page cache (Figure 2's prefetching); returns the
        resident fraction measured afterwards."""
        raise NotImplementedError(f"device {self.name} cannot preload files into its page cache")

    def file_bytes(self, paths: list[str]) -> int:
        """Total size of the files in bytes."""
        res = self.run(["stat", "-c", "%s", *paths])
        if res.returncode != 0:
            raise RuntimeError(f"stat failed on device {self.name}: {res.stdout.strip()[:200]}")
        return sum(int(line) for line in res.stdout.split())

    @abstractmethod
    def sample_memory(self, pid: int) -> dict | None:
        """{"rss_kb", "hwm_kb"} of a running process, None once it has exited."""

    @abstractmethod
    def load_average(self) -> float:
        """One-minute load average (the busy-host gate's lagging signal)."""

    def cpu_busy(self, window_s: float) -> float:
        """Share of all the device's CPU time spent off idle (steal included) over the next `window_s` seconds: the
        busy-host gate's signal of what runs now. Two reads of /proc/stat's first line, on the device."""
        res = self.run(["sh", "-c", f"head -n 1 /proc/stat; sleep {float(window_s):g}; head -n 1 /proc/stat"])
        lines = res.stdout.splitlines()
        if res.returncode != 0 or len(lines) != 2:
            raise RuntimeError(f"cannot read /proc/stat on device {self.name}: {res.stdout.strip()[:200]}")
        return cpu_busy_share(*lines)

    def cpu_jiffies(self) -> CpuJiffies | None:
        """All CPUs' busy and total time so far (/proc/stat's first line), for attributing the CPU time of a run
        (protocol.busy_signal=cpu_during); None where it cannot be read in well under a run's time (a phone, over
        adb): the cold protocol then gates before each run instead."""
        return None

    @abstractmethod
    def power_source(self) -> tuple[Callable[[], float] | None, str | None]:
        """(read_energy_joules, None) where the device exposes an energy counter, else (None, reason)."""

    @abstractmethod
    def info(self) -> dict:
        """Provenance: host, kernel, cpu model, cores, memory."""

    def close(self) -> None:
        """Release what the device holds (throttle groups, connections)."""


@dataclass(frozen=True)
class CpuJiffies:
    """/proc/stat's "cpu" line summed: busy and total clock ticks of all CPUs (USER_HZ, 100 per second on Linux).
    Busy is everything but idle and iowait over user, nice, system, idle, iowait, irq, softirq, steal (guest time is
    already in user)."""
    busy: int
    total: int

    @classmethod
    def parse(cls, line: str) -> "CpuJiffies":
        parts = line.split()
        if not parts or parts[0] != "cpu" or len(parts) < 9:
            raise ValueError(f"not /proc/stat's cpu line: {line[:80]!r}")
        ticks = [int(x) for x in parts[1:9]]
        return cls(sum(ticks) - ticks[3] - ticks[4], sum(ticks))


def cpu_busy_share(before: str, after: str) -> float:
    """Busy share of all CPUs' time between two /proc/stat "cpu" lines (CpuJiffies)."""
    a, b = CpuJiffies.parse(before), CpuJiffies.parse(after)
    total = b.total - a.total
    return 0.0 if total <= 0 else min(1.0, max(0.0, (b.busy - a.busy) / total))


def parse_proc_status(text: str) -> dict:
    """VmRSS and VmHWM (kB) from the text of /proc/PID/status."""
    out = {}
    for key, name in (("VmRSS", "rss_kb"), ("VmHWM", "hwm_kb")):
        m = re.search(rf"^{key}:\s+(\d+)\s+kB", text, re.M)
        if m:
            out[name] = int(m.group(1))
    if "rss_kb" not in out:
        raise ValueError(f"no VmRSS line in /proc/PID/status text: {text[:200]!r}")
    return out


DEVICES = Registry("device", DeviceConfig, package="harness.devices")  # conf/device/<name>.yaml: devices/<name>.py
register_device = DEVICES.register


def get_device(cfg) -> Device:
    """A device from a DeviceConfig or a mapping with its keys (e.g. a Hydra node)."""
    return DEVICES.create(cfg)

