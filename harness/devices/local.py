"""The local host (the default device): subprocesses, posix_fadvise eviction, /proc sampling, blkio flash emulation."""
from __future__ import annotations

import os
import platform
import shutil
import subprocess
import time
from pathlib import Path

from harness.cache import cache_dir
from harness.devices import pagecache
from harness.devices.base import Completed, Device, parse_proc_status, register_device
from harness.devices.throttle import BlkioThrottle

RAPL = Path("/sys/class/powercap/intel-rapl:0/energy_uj")


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

    def sample_memory(self, pid):
        try:
            return parse_proc_status(Path(f"/proc/{pid}/status").read_text())
        except (FileNotFoundError, ProcessLookupError, ValueError):  # exited (a zombie has no VmRSS line)
            return None

    def load_average(self) -> float:
        return os.getloadavg()[0]

    def power_source(self):
        if not RAPL.parent.parent.exists():
            return None, "no /sys/class/powercap on this host (no RAPL energy counter exposed to this VM)"
        if not os.access(RAPL, os.R_OK):
            return None, f"{RAPL} is absent or not readable"
        return (lambda: int(RAPL.read_text()) / 1e6), None

    def temperature_c(self):
        temps = []
        for zone in Path("/sys/class/thermal").glob("thermal_zone*"):
            try:
                temps.append(int((zone / "temp").read_text()) / 1000)
            except (OSError, ValueError):
                pass
        return (max(temps), None) if temps else (None, "no readable /sys/class/thermal zone on this host")

    def info(self) -> dict:
        cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                    if line.startswith("model name")), platform.processor())
        mem_kb = int(Path("/proc/meminfo").read_text().split()[1])
        return {"device": self.name, "host": platform.node(), "kernel": platform.release(), "cpu": cpu,
                "cores": os.cpu_count(), "mem_gb": round(mem_kb / 2**20, 1), "flash_emulated_mbps": self.flash_read_mbps}

    def close(self) -> None:
        if self._throttle:
            self._throttle.close()


def _merged(env: dict | None) -> dict:
    return {**os.environ, **(env or {})}
