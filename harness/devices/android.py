"""An Android phone over the adb protocol (`adb-shell` package, no adb binary needed): TCP (`device.adb_address`,
"host:port") or USB (`device.serial`).

Eviction and residency use pagecache_tool (pagecache_tool.c beside this file), built static for aarch64 with Debian's
cross compiler and pushed on first use: posix_fadvise/mincore need no root. A measured process runs as
`sh -c 'echo __pid=$$; exec CMD'`: the first line gives its pid for /proc sampling, the rest streams back as its
output (adb's shell protocol v1 merges stdout and stderr; the command's stderr is redirected into stdout). Storage is
the phone's real flash, so `device.flash_read_mbps` must be null. Not testable without a phone: every call that needs
one says "no device reachable at <addr>" when none answers.
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import threading
import time
from pathlib import Path

from harness.cache import cache_dir
from harness.devices.base import Completed, Device, parse_proc_status, register_device

TOOL_SOURCE = Path(__file__).with_name("pagecache_tool.c")
_RC = "__edgeflow_rc="


class DeviceUnreachable(RuntimeError):
    """No phone answered at the configured address or serial."""


def pagecache_tool_binary() -> Path:
    """pagecache_tool for aarch64 (static), built once into the cache."""
    out = cache_dir("android") / "pagecache_tool"
    if not out.is_file() or out.stat().st_mtime < TOOL_SOURCE.stat().st_mtime:
        res = subprocess.run(["aarch64-linux-gnu-gcc", "-O2", "-static", "-o", str(out), str(TOOL_SOURCE)],
                             capture_output=True, text=True)
        if res.returncode != 0:
            raise RuntimeError(f"cannot build pagecache_tool for aarch64 (needs g++-aarch64-linux-gnu): {res.stderr}")
    return out


def shell_command(cmd: list[str], cwd: str | None = None, env: dict | None = None, with_rc: bool = True) -> str:
    """One shell line for `adb shell`: cd, environment, the command, and its exit status echoed last."""
    parts = []
    if cwd:
        parts.append(f"cd {shlex.quote(cwd)} &&")
    parts += [f"{k}={shlex.quote(str(v))}" for k, v in (env or {}).items()]
    parts.append(shlex.join(cmd))
    line = " ".join(parts)
    return f"{line}; echo {_RC}$?" if with_rc else line


def split_rc(output: str) -> tuple[int, str]:
    """(exit status, output without the status line) of a shell_command's output."""
    m = re.search(rf"{_RC}(\d+)\s*$", output)
    if not m:
        raise RuntimeError(f"the device's shell printed no exit status; output tail: {output[-300:]!r}")
    return int(m.group(1)), output[:m.start()]


class AndroidProcess:
    """A measured process on the phone, streamed through one adb shell stream into a local pipe."""

    def __init__(self, adb, line: str):
        self._read_fd, write_fd = os.pipe()
        self.stdout = os.fdopen(self._read_fd, "rb", buffering=0)
        err_r, err_w = os.pipe()
        os.close(err_w)  # merged into stdout by adb: stderr is an empty, closed stream
        self.stderr = os.fdopen(err_r, "rb", buffering=0)
        self.pid = 0
        self.returncode = None
        self._pid_known = threading.Event()
        self._thread = threading.Thread(target=self._pump, args=(adb, line, write_fd), daemon=True)
        self._thread.start()
        if not self._pid_known.wait(30):
            raise DeviceUnreachable("the phone did not start the process within 30 s")

    def _pump(self, adb, line, write_fd):
        buf = b""
        try:
            for chunk in adb.streaming_shell(line, decode=False):
                if not self.pid:
                    buf += chunk
                    m = re.match(rb"__pid=(\d+)\r?\n", buf)
                    if not m:
                        continue
                    self.pid, chunk = int(m.group(1)), buf[m.end():]
                    self._pid_known.set()
                rc = re.search(rf"{_RC}(\d+)\s*$".encode(), chunk)
                if rc:
                    self.returncode, chunk = int(rc.group(1)), chunk[:rc.start()]
                os.write(write_fd, chunk)
        finally:
            os.close(write_fd)
            self._pid_known.set()

    def wait(self, timeout=None):
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise subprocess.TimeoutExpired("adb shell", timeout)
        return -1 if self.returncode is None else self.returncode

    def kill(self):
        pass  # the stream ends when the remote process is killed by AndroidDevice.kill_remote

    def peak_rss_kb(self):
        return None  # no wait4 over adb; the protocol falls back to the /proc timeline's maximum

    def bytes_read(self):
        return None


@register_device
class AndroidDevice(Device):
    name = "android"

    def __init__(self, cfg):
        super().__init__(cfg)
        if cfg.flash_read_mbps is not None:
            raise ValueError("device.flash_read_mbps must be null for android: the phone's flash is real, not emulated")
        self._adb = None
        self._tool = None

    @property
    def address(self) -> str:
        return self.cfg.adb_address or f"usb:{self.cfg.serial or 'first device'}"

    def adb(self):
        if self._adb is None:
            from adb_shell.adb_device import AdbDeviceTcp
            from adb_shell.auth.keygen import keygen
            from adb_shell.auth.sign_pythonrsa import PythonRSASigner

            key = Path.home() / ".android" / "adbkey"
            if not key.is_file():
                key.parent.mkdir(parents=True, exist_ok=True)
                keygen(str(key))
            signer = PythonRSASigner(key.with_suffix(".pub").read_text(), key.read_text())
            try:
                if self.cfg.adb_address:
                    host, port = self.cfg.adb_address.rsplit(":", 1)
                    dev = AdbDeviceTcp(host, int(port), default_transport_timeout_s=self.cfg.adb_timeout_s)
                else:
                    from adb_shell.adb_device import AdbDeviceUsb  # needs the libusb1 package

                    dev = AdbDeviceUsb(serial=self.cfg.serial, default_transport_timeout_s=self.cfg.adb_timeout_s)
                dev.connect(rsa_keys=[signer], auth_timeout_s=self.cfg.adb_timeout_s)
            except Exception as e:
                raise DeviceUnreachable(f"no device reachable at {self.address}: {type(e).__name__}: {e}") from None
            self._adb = dev
        return self._adb

    def run(self, cmd, env=None, timeout=None, cwd=None) -> Completed:
        out = self.adb().shell(shell_command(cmd, cwd, env) + " 2>&1", timeout_s=timeout)
        code, text = split_rc(out)
        return Completed(code, text, "")

    def spawn(self, cmd, env=None, cwd=None) -> AndroidProcess:
        inner = shell_command(cmd, cwd, env, with_rc=False)
        line = f"sh -c {shlex.quote('echo __pid=$$; exec ' + inner + ' 2>&1')}; echo {_RC}$?"
        return AndroidProcess(self.adb(), line)

    def push(self, local, remote) -> str:
        self.adb().shell(f"mkdir -p {shlex.quote(os.path.dirname(remote))}")
        self.adb().push(str(local), remote)
        return remote

    def pull(self, remote, local) -> str:
        self.adb().pull(remote, str(local))
        return str(local)

    def _pagecache(self, verb: str, paths) -> float:
        if self._tool is None:
            self._tool = self.push(pagecache_tool_binary(), f"{self.cfg.remote_dir}/pagecache_tool")
            self.run(["chmod", "755", self._tool])
        res = self.run([self._tool, verb, *paths])
        if res.returncode != 0:
            raise RuntimeError(f"pagecache_tool {verb} failed on the phone: {res.stdout}")
        return parse_residency(res.stdout)

    def evict(self, paths) -> float:
        return self._pagecache("evict", paths)

    def resident_fraction(self, paths) -> float:
        return self._pagecache("resident", paths)

    def sample_memory(self, pid):
        res = self.run(["cat", f"/proc/{pid}/status"])
        return parse_proc_status(res.stdout) if res.returncode == 0 and "VmRSS" in res.stdout else None

    def load_average(self) -> float:
        return float(self.run(["cat", "/proc/loadavg"]).stdout.split()[0])

    def power_source(self):
        return None, "energy on Android is not measured yet (battery current_now sampling needs USB power off)"

    def info(self) -> dict:
        def prop(name):
            return self.run(["getprop", name]).stdout.strip()
        return {"device": self.name, "address": self.address, "model": prop("ro.product.model"),
                "soc": prop("ro.soc.model"), "android": prop("ro.build.version.release"),
                "kernel": self.run(["uname", "-r"]).stdout.strip(),
                "cores": int(self.run(["nproc"]).stdout.strip() or 0), "flash_emulated_mbps": None,
                "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}

    def close(self):
        if self._adb is not None:
            self._adb.close()


def parse_residency(text: str) -> float:
    """Fraction from pagecache_tool's "<resident pages> <total pages>" line."""
    m = re.fullmatch(r"\s*(\d+) (\d+)\s*", text)
    if not m:
        raise RuntimeError(f"unexpected pagecache_tool output: {text!r}")
    resident, total = int(m.group(1)), int(m.group(2))
    return resident / total if total else 0.0
