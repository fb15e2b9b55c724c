"""The local host (the default device): subprocesses, posix_fadvise eviction, /proc sampling, blkio flash emulation."""
from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path

from harness.cache import cache_dir
from harness.devices import pagecache
from harness.devices.base import (Completed, CpuJiffies, Device, cpu_busy_share, parse_proc_status,
                                  register_device)
from harness.devices.throttle import BlkioThrottle
from harness.host import cpu_model

POWERCAP = Path("/sys/class/powercap")
# Package-level RAPL domains: intel-rapl:N (Intel, and AMD Zen through the same driver since Linux 5.8) and
# amd-rapl:N; sub-domains (intel-rapl:N:M: core, uncore, dram) are parts of a package and are not added again.
RAPL_PACKAGE = re.compile(r"(intel|amd)-rapl:\d+")


class RaplCounter:
    """Joules since creation, summed over the host's package RAPL domains, unwrapping each counter at its
    max_energy_range_uj. Called at spawn and at the first token by the cold-start protocol (and by its sampler)."""

    def __init__(self, files: list[Path]):
        self.files = files
        self.ranges = [_read_int(f.with_name("max_energy_range_uj")) or 2**32 for f in files]
        self.last = [_read_int(f) for f in files]
        self.total_uj = 0
        self.lock = threading.Lock()

    def __call__(self) -> float:
        with self.lock:  # the protocol's sampler and stdout reader threads both read it
            return self._read()

    def _read(self) -> float:
        for i, f in enumerate(self.files):
            now = _read_int(f)
            if now is None:
                raise OSError(f"{f} went away during the run")
            delta = now - self.last[i]
            self.total_uj += delta if delta >= 0 else delta + self.ranges[i]  # the counter wrapped
            self.last[i] = now
        return self.total_uj / 1e6


def rapl_energy(root: Path = POWERCAP) -> tuple[RaplCounter | None, str | None]:
    """(counter, None) when every package domain's energy_uj is readable, else (None, reason naming the paths)."""
    checked = f"{root}/intel-rapl:*/energy_uj, {root}/amd-rapl:*/energy_uj"
    if not root.is_dir():
        return None, f"no readable energy counter on this host (checked {checked}: {root} does not exist)"
    files = sorted(d / "energy_uj" for d in root.iterdir() if RAPL_PACKAGE.fullmatch(d.name))
    files = [f for f in files if f.exists()]
    if not files:
        return None, f"no readable energy counter on this host (checked {checked}: no package domain)"
    unreadable = [str(f) for f in files if not os.access(f, os.R_OK)]
    if unreadable:
        return None, (f"no readable energy counter on this host ({', '.join(unreadable)} not readable by this user; "
                      "since Linux 5.10 energy_uj is root-only: run as root or chmod it)")
    try:
        return RaplCounter(files), None
    except (OSError, ValueError) as e:
        return None, f"no readable energy counter on this host (reading {files[0]}: {e})"


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text())
    except FileNotFoundError:
        return None


class LocalProcess:
    """A measured child process. Reaped with wait4 so the kernel's peak RSS and block input count are kept."""

    def __init__(self, popen: subprocess.Popen, throttle: BlkioThrottle | None):
        self.popen, self.pid = popen, popen.pid
        self.stdout, self.stderr = popen.stdout, popen.stderr
        self._throttle = throttle
        self._throttle_bytes0 = throttle.bytes_read() if throttle else 0
        self._rusage = None

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.popen.returncode is None:
            pid, status, rusage = os.wait4(self.pid, os.WNOHANG)
            if pid == self.pid:
                self.popen.returncode = os.waitstatus_to_exitcode(status)
                self._rusage = rusage
                break
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.popen.args, timeout)
            time.sleep(0.002)
        return self.popen.returncode

    def kill(self) -> None:
        if self.popen.returncode is None:
            self.popen.kill()
            self.wait()

    def peak_rss_kb(self) -> int | None:
        return self._rusage.ru_maxrss if self._rusage else None  # Linux: kilobytes

    def cpu_seconds(self) -> float | None:
        return self._rusage.ru_utime + self._rusage.ru_stime if self._rusage else None

    def samples(self):
        return None  # sampled from the host (harness/measure/cold.py polls /proc)

    def bytes_read(self) -> int | None:
        if self._throttle:  # blkio's count for the group, which holds only this process
            return self._throttle.bytes_read() - self._throttle_bytes0
        return self._rusage.ru_inblock * 512 if self._rusage else None  # 512-byte blocks read from storage


@register_device
class LocalDevice(Device):
    name = "local"

    def __init__(self, cfg):
        super().__init__(cfg)
        self._throttle = None
        if cfg.flash_read_mbps is not None:  # model files live under the cache root: throttle that disk
            self._throttle = BlkioThrottle(cfg.flash_read_mbps, cache_dir())

    def run(self, cmd, env=None, timeout=None, cwd=None) -> Completed:
        res = subprocess.run(cmd, env=_merged(env), timeout=timeout, cwd=cwd, capture_output=True, text=True)
        return Completed(res.returncode, res.stdout, res.stderr)

    def spawn(self, cmd, env=None, cwd=None) -> LocalProcess:
        join = self._throttle.join if self._throttle else None  # runs in the child between fork and exec
        popen = subprocess.Popen(cmd, env=_merged(env), cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, bufsize=0, preexec_fn=join)
        return LocalProcess(popen, self._throttle)

    def push(self, local, remote) -> str:
        return str(local)  # same file system: nothing to copy

    def pull(self, remote, local) -> str:
        if Path(remote).resolve() != Path(local).resolve():
            shutil.copyfile(remote, local)
        return str(local)

    def evict(self, paths) -> float:
        return pagecache.evict(paths)

    def resident_fraction(self, paths) -> float:
        return pagecache.resident_fraction(paths)

    def preload(self, paths, fraction: float) -> float:
        return pagecache.preload(paths, fraction)

    def file_bytes(self, paths) -> int:
        return sum(f.stat().st_size for f in pagecache.expand_files(paths))

    def sample_memory(self, pid):
        try:
            return parse_proc_status(Path(f"/proc/{pid}/status").read_text())
        except (FileNotFoundError, ProcessLookupError, ValueError):  # exited (a zombie has no VmRSS line)
            return None

    def load_average(self) -> float:
        return os.getloadavg()[0]

    def cpu_busy(self, window_s: float) -> float:
        before = Path("/proc/stat").read_text().split("\n", 1)[0]
        time.sleep(window_s)
        return cpu_busy_share(before, Path("/proc/stat").read_text().split("\n", 1)[0])

    def cpu_jiffies(self) -> CpuJiffies:
        return CpuJiffies.parse(Path("/proc/stat").read_text().split("\n", 1)[0])

    def power_source(self):
        return rapl_energy()  # the CPU packages' energy (RAPL), not the whole machine's

    def temperature_c(self):
        temps = []
        for zone in Path("/sys/class/thermal").glob("thermal_zone*"):
            try:
                temps.append(int((zone / "temp").read_text()) / 1000)
            except (OSError, ValueError):
                pass
        return (max(temps), None) if temps else (None, "no readable /sys/class/thermal zone on this host")

    def info(self) -> dict:
        cpu = cpu_model() or platform.processor()
        mem_kb = int(Path("/proc/meminfo").read_text().split()[1])
        return {"device": self.name, "host": platform.node(), "kernel": platform.release(), "cpu": cpu,
                "cores": os.cpu_count(), "mem_gb": round(mem_kb / 2**20, 1), "flash_emulated_mbps": self.flash_read_mbps}

    def close(self) -> None:
        if self._throttle:
            self._throttle.close()


def _merged(env: dict | None) -> dict:
    return {**os.environ, **(env or {})}
