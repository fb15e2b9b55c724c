"""The loopback device's file system and sensors: a host folder that plays the phone's paths.

Device paths under MAPPED live in the folder (`<root>/data/local/tmp/...`); every other absolute path is the host's
own (so `/proc/<pid>/status` of a process the loopback runs is that real process's, and `/proc/loadavg` is this
host's). Shell command lines are rewritten textually: each MAPPED prefix that starts a path becomes the folder's copy,
whatever the quoting around it, so `cat '/sys/class/thermal/thermal_zone0/temp'` reads the scripted file; in the
output, sandbox paths are shown as the device paths again. A binary
that opens a device path it computed itself (not one on its command line) sees the host's file system: the harness
passes every path on the command line, which is also what makes the paths overridable on a real phone.

Sensors are scripted: each file under /sys is a constant or a function of the seconds since the loopback started,
rewritten every 10 ms (atomically, so a reader never sees half a number). Defaults resemble a phone on battery.
`getprop` is a script over a property file; `su` exists only when the loopback plays a rooted phone, and then
`echo 3 > /proc/sys/vm/drop_caches` evicts every file of the folder from the host's page cache (posix_fadvise),
since the host's real drop_caches is not the phone's to write.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Callable, Union

from harness.cache import cache_dir

MAPPED = ("/data/local/tmp", "/data/misc/adb", "/sys/class/power_supply", "/sys/class/thermal",
          "/sys/devices/system/cpu/cpufreq", "/proc/sys/vm/drop_caches", "/system/bin")
WRITABLE = ("/data/local/tmp",)  # what the phone's shell user may write through sync
SHIM_SOURCE = Path(__file__).with_name("exec_shim.c")

Value = Union[str, int, float, Callable[[float], Union[str, int, float]]]

DEFAULT_SENSORS: dict[str, Value] = {
    # Many Qualcomm phones report current_now in microamperes, negative while discharging; voltage in microvolts.
    "/sys/class/power_supply/battery/current_now": -420_000,
    "/sys/class/power_supply/battery/voltage_now": 3_950_000,
    "/sys/class/power_supply/battery/temp": 312,  # tenths of a degree C
    "/sys/class/power_supply/battery/status": "Discharging",
    "/sys/class/thermal/thermal_zone0/type": "cpu-0-0-usr",
    "/sys/class/thermal/thermal_zone0/temp": 36_000,  # millidegrees C
    "/sys/class/thermal/thermal_zone1/type": "cpu-1-0-usr",
    "/sys/class/thermal/thermal_zone1/temp": 37_500,
    "/sys/class/thermal/thermal_zone2/type": "battery",
    "/sys/class/thermal/thermal_zone2/temp": 31_200,
    "/sys/devices/system/cpu/cpufreq/policy0/scaling_governor": "schedutil",
    "/sys/devices/system/cpu/cpufreq/policy4/scaling_governor": "schedutil",
}

DEFAULT_PROPS = {
    "ro.product.manufacturer": "edgeflow-bench", "ro.product.model": "EdgeFlow loopback adbd",
    "ro.product.name": "loopback", "ro.product.device": "loopback", "ro.product.cpu.abi": "arm64-v8a",
    "ro.soc.manufacturer": "QEMU", "ro.soc.model": "qemu-aarch64 on the host", "ro.hardware": "loopback",
    "ro.build.version.release": "14", "ro.build.version.sdk": "34", "ro.serialno": "loopback0",
    # A real phone never sets this: the harness reads it to label the loopback's rows (emulated / stand-in).
    "ro.edgeflow.loopback": "1",
}


def _prefix_pattern(prefix: str) -> re.Pattern:
    # A prefix that starts a path: not preceded by a path character, followed by "/" or the end of the path.
    return re.compile(r"(?<![\w./~-])" + re.escape(prefix) + r"(?=/|$|[^\w.-])")


class Sandbox:
    def __init__(self, root: str | os.PathLike, rooted: bool = False, props: dict | None = None,
                 sensors: dict[str, Value] | None = None):
        self.root = Path(root).resolve()
        self.rooted = rooted
        self.props = {**DEFAULT_PROPS, "ro.debuggable": "1" if rooted else "0", **(props or {})}
        self.sensors: dict[str, Value] = {**DEFAULT_SENSORS, **(sensors or {})}
        self._patterns = [(_prefix_pattern(p), str(self.root) + p) for p in MAPPED]
        self._t0 = time.monotonic()
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        for d in ("data/local/tmp", "data/misc/adb", "system/bin", "proc/sys/vm"):
            (self.root / d).mkdir(parents=True, exist_ok=True)
        self._write_tools()
        self.update_sensors()

    # --- paths ---
    def host_path(self, device_path: str) -> Path:
        """Where a device path lives on this host."""
        for prefix in MAPPED:
            if device_path == prefix or device_path.startswith(prefix + "/"):
                return Path(str(self.root) + device_path)
        return Path(device_path)

    def writable(self, device_path: str) -> bool:
        norm = os.path.normpath(device_path)
        return any(norm == p or norm.startswith(p + "/") for p in WRITABLE)

    def rewrite(self, command: str) -> str:
        """A shell command line with each mapped device path replaced by its sandbox copy."""
        for pattern, replacement in self._patterns:
            command = pattern.sub(lambda _: replacement, command)
        return command

    def unmap(self, output: bytes) -> bytes:
        """Shell output with sandbox paths shown as the device paths they play (a glob of /sys/class/thermal lists
        /sys/class/thermal/...). A path cut across two output chunks is left as it is."""
        root = str(self.root).encode()
        if root not in output:
            return output
        for prefix in MAPPED:
            output = output.replace(root + prefix.encode(), prefix.encode())
        return output

    # --- shell environment ---
    def shell_env(self) -> dict:
        qemu = shutil.which("qemu-aarch64-static") or "qemu-aarch64-static"
        path = f"{self.root}/system/bin:/usr/local/bin:/usr/bin:/bin"
        return {"PATH": path, "HOME": str(self.root) + "/data/local/tmp", "TMPDIR": str(self.root) + "/data/local/tmp",
                "LD_PRELOAD": str(exec_shim()), "EDGEFLOW_QEMU": qemu, "LANG": "C", "ANDROID_DATA": "/data"}

    def _write_tools(self):
        props = self.root / ".props"
        props.write_text("".join(f"{k}={v}\n" for k, v in sorted(self.props.items())))
        getprop = self.root / "system/bin/getprop"
        getprop.write_text(
            "#!/bin/sh\n# getprop [NAME [DEFAULT]]: the loopback's system properties\n"
            f"props='{props}'\n"
            'if [ $# -eq 0 ]; then sed \'s/^\\([^=]*\\)=\\(.*\\)$/[\\1]: [\\2]/\' "$props"; exit 0; fi\n'
            'awk -v k="$1" -v d="$2" \'index($0, k "=") == 1 { print substr($0, length(k) + 2); f = 1; exit }'
            ' END { if (!f) print d }\' "$props"\n')
        getprop.chmod(0o755)
        su = self.root / "system/bin/su"
        if self.rooted:  # the root is pretend: commands run as the loopback's own user
            su.write_text("#!/bin/sh\n# su -c CMD | su 0|root CMD...\n"
                          'case "$1" in -c) shift; exec /bin/sh -c "$1";; 0|root) shift; exec "$@";;'
                          ' "") exec /bin/sh;; *) echo "su: unknown option $1" >&2; exit 1;; esac\n')
            su.chmod(0o755)
        else:  # a user build has no su; this one shadows the host's
            su.write_text('#!/bin/sh\necho "/system/bin/sh: su: inaccessible or not found" >&2\nexit 127\n')
            su.chmod(0o755)
        sh = self.root / "system/bin/sh"
        if not sh.exists():
            sh.symlink_to("/bin/sh")
        (self.root / "proc/sys/vm/drop_caches").write_text("0\n")

    def after_command(self):
        """Emulate a root write to drop_caches: evict every sandbox file from the page cache."""
        f = self.root / "proc/sys/vm/drop_caches"
        if not self.rooted or f.read_text().strip() not in ("1", "3"):
            return
        from harness.devices.pagecache import evict_file

        for p in (self.root / "data").rglob("*"):
            if p.is_file() and not p.is_symlink():
                try:
                    evict_file(p)
                except OSError:
                    pass
        f.write_text("0\n")

    # --- sensors ---
    def set_sensor(self, device_path: str, value: Value):
        with self._lock:
            self.sensors[device_path] = value
        self.update_sensors()

    def update_sensors(self):
        with self._write_lock:  # the sensor thread and set_sensor both write
            self._update_sensors()

    def _update_sensors(self):
        t = time.monotonic() - self._t0
        with self._lock:
            items = list(self.sensors.items())
        for path, value in items:
            text = f"{value(t) if callable(value) else value}\n"
            dest = self.host_path(path)
            dest.parent.mkdir(parents=True, exist_ok=True)
            tmp = dest.with_name(f".{dest.name}.tmp")
            tmp.write_text(text)
            os.replace(tmp, dest)

    def start(self):
        def loop():
            while not self._stop.wait(0.01):
                self.update_sensors()
        self._thread = threading.Thread(target=loop, name="loopback-sensors", daemon=True)
        self._thread.start()

    def stop(self):
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=2)


def exec_shim() -> Path:
    """exec_shim.so for this host, built once per source version into the cache."""
    digest = hashlib.sha256(SHIM_SOURCE.read_bytes()).hexdigest()[:12]
    out = cache_dir("loopback") / f"exec_shim-{digest}.so"
    if not out.is_file():
        tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
        res = subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-o", str(tmp), str(SHIM_SOURCE), "-ldl"],
                             capture_output=True, text=True)
        if res.returncode:
            raise RuntimeError(f"cannot build the loopback's exec shim (needs gcc): {res.stderr[-2000:]}")
        os.replace(tmp, out)
    return out
