"""An Android phone over the adb protocol (`adb-shell` package, no adb binary needed): TCP (`device.adb_address`,
"host:port") or USB (`device.serial`). docs/android.md is the user's guide; the loopback adbd
(harness/devices/loopback) plays a phone in the tests.

What lives on the phone, under `device.remote_dir`: bin/ (edgeflow-run, pagecache_tool, sampler_tool: static aarch64
builds), models/ (packed weights), run/ (each run's samples and stderr), and .manifest: one line per pushed file,
"sha256 size mtime path", so a file is pushed again only when its content changed or the phone's copy is not the
one pushed (its size or mtime differ).

Commands are built with shlex quoting and nothing else: a file name or argument reaches the phone's shell as one
literal word whatever it contains. `run` wraps the command as `{ CMD; } 2>&1; echo __edgeflow_rc=$?` (shell v1 has
no exit status; adb-shell speaks only v1). A measured process runs as

    sh -c 'cd DIR && echo __pid=$$ && { ( trap "" HUP; exec sampler_tool --pid $$ ... ) & } && exec env K=V CMD 2>ERR'

so its pid is known before it starts, one sampler process records its memory, the battery's current and voltage
and the temperatures at >= 10 Hz into run/samples-N (pulled after exit), and stdout streams back unbuffered for the
first-token clock. Eviction: `su` drop_caches where the phone is rooted (device.root), else posix_fadvise through
pagecache_tool; residency is verified by mincore either way. Storage is the phone's real flash, so
`device.flash_read_mbps` must be null.
"""
from __future__ import annotations

import hashlib
import os
import re
import shlex
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from harness.cache import cache_dir
from harness.devices.base import Completed, Device, DeviceConfig, parse_proc_status, register_device
from harness.devices.sampling import Samples, celsius, parse_samples

TOOLS_DIR = Path(__file__).parent
_RC = "__edgeflow_rc="
_FACTS: dict[str, dict] = {}  # device facts, once per process (a sweep) and address


class DeviceUnreachable(RuntimeError):
    """No phone answered at the configured address or serial, or it went away mid-run."""


def device_tool(name: str) -> Path:
    """harness/devices/<name>.c built static for aarch64, once per source version, into the cache."""
    source = TOOLS_DIR / f"{name}.c"
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:12]
    out = cache_dir("android") / f"{name}-{digest}"
    if not out.is_file():
        tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
        res = subprocess.run(["aarch64-linux-gnu-gcc", "-O2", "-static", "-o", str(tmp), str(source)],
                             capture_output=True, text=True)
        if res.returncode != 0:
            raise RuntimeError(f"cannot build {name} for aarch64 (needs g++-aarch64-linux-gnu): {res.stderr}")
        os.replace(tmp, out)
    return out


def pagecache_tool_binary() -> Path:
    return device_tool("pagecache_tool")


def shell_command(cmd: list[str], cwd: str | None = None, env: dict | None = None) -> str:
    """One shell line: cd, the environment, the command; every word quoted."""
    parts = [f"cd {shlex.quote(cwd)} &&"] if cwd else []
    parts += [f"{k}={shlex.quote(str(v))}" for k, v in (env or {}).items() if _env_name(k)]
    parts.append(shlex.join(cmd))
    return " ".join(parts)


def with_status(line: str) -> str:
    """The line with its stderr merged into stdout and its exit status printed last."""
    return f"{{ {line}; }} 2>&1; echo {_RC}$?"


def _env_name(k: str) -> bool:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k):
        raise ValueError(f"not an environment variable name: {k!r}")
    return True


def split_rc(output: str) -> tuple[int, str]:
    """(exit status, output without the status line) of a with_status line's output."""
    m = re.search(rf"{_RC}(\d+)\s*$", output)
    if not m:
        raise RuntimeError(f"the device's shell printed no exit status; output tail: {output[-300:]!r}")
    return int(m.group(1)), output[:m.start()]


def _transport(host: str, port: int):
    """adb-shell's TCP transport, except that a connection the phone closed is an error at once (adb-shell's own
    keeps polling an EOF socket until its read timeout)."""
    from adb_shell.transport.tcp_transport import TcpTransport

    class EofAwareTcpTransport(TcpTransport):
        def bulk_read(self, numbytes, transport_timeout_s):
            data = super().bulk_read(numbytes, transport_timeout_s)
            if not data:
                raise ConnectionResetError(f"the device at {host}:{port} closed the connection")
            return data

    return EofAwareTcpTransport(host, port)


class AndroidProcess:
    """A measured process on the phone, its output streamed through one adb shell stream into a local pipe."""

    def __init__(self, device: "AndroidDevice", line: str, samples_path: str, stderr_path: str):
        self._device, self._samples_path, self._stderr_path = device, samples_path, stderr_path
        read_fd, write_fd = os.pipe()
        self.stdout = os.fdopen(read_fd, "rb", buffering=0)
        self._err_r, self._err_w = os.pipe()  # filled with the phone's stderr file after exit
        self.stderr = os.fdopen(self._err_r, "rb", buffering=0)
        self.pid = 0
        self.returncode = None
        self.error: Exception | None = None
        self._samples: Samples | None = None
        self._pid_known = threading.Event()
        self._thread = threading.Thread(target=self._pump, args=(device.adb(), line, write_fd), daemon=True)
        self._thread.start()
        if not self._pid_known.wait(30) or not self.pid:
            if self.error is not None:
                raise DeviceUnreachable(f"the device at {device.address} went away while starting the process: "
                                        f"{type(self.error).__name__}: {self.error}")
            raise DeviceUnreachable(f"the phone did not start the process within 30 s (no pid line from `{line[:120]}`)")

    def _pump(self, adb, line, write_fd):
        buf = b""
        try:
            # The read timeout is the protocol's business (system.timeout_s, then kill): no limit here.
            for chunk in adb.streaming_shell(line, read_timeout_s=7 * 86400, decode=False):
                if not self.pid:
                    buf += chunk
                    m = re.match(rb"__pid=(\d+)\r?\n", buf)
                    if not m:
                        continue
                    self.pid, chunk = int(m.group(1)), buf[m.end():]
                    self._pid_known.set()
                buf = (buf + chunk)[-64:] if self.pid else buf
                rc = re.search(rf"{_RC}(\d+)\s*$".encode(), chunk)
                if rc:
                    self.returncode, chunk = int(rc.group(1)), chunk[:rc.start()]
                os.write(write_fd, chunk)
        except Exception as e:  # the phone went away mid-run
            self.error = e
        finally:
            os.close(write_fd)
            self._pid_known.set()

    def wait(self, timeout=None):
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise subprocess.TimeoutExpired("adb shell", timeout)
        if self.error is not None:
            self._close_stderr()
            raise DeviceUnreachable(f"the device at {self._device.address} went away during the run: "
                                    f"{type(self.error).__name__}: {self.error}")
        self._collect()
        return -1 if self.returncode is None else self.returncode

    def _collect(self):
        """After exit: the sampler's file and the stderr file, pulled over sync (outside the timed window)."""
        if self._samples is not None or self._err_w is None:
            return
        dev = self._device
        try:
            err = dev.read_file(self._stderr_path, missing_ok=True)
            os.write(self._err_w, err[-65536:])
            deadline = time.monotonic() + 5  # the sampler notices the exit within one period (plus its own start)
            while True:
                text = dev.read_file(self._samples_path, missing_ok=True).decode("utf-8", "replace")
                if "# end" in text or time.monotonic() > deadline:
                    break
                time.sleep(max(0.05, dev.cfg.sample_interval_ms / 1000))
            self._samples = parse_samples(text) if text else Samples(self.pid, dev.cfg.sample_interval_ms)
            dev.run(["rm", "-f", self._samples_path, self._stderr_path])
        finally:
            self._close_stderr()

    def _close_stderr(self):
        if self._err_w is not None:
            os.close(self._err_w)
            self._err_w = None

    def kill(self):
        """Kill the process on the phone (closing adb-shell's stream would not: it never sends CLSE)."""
        if self.pid and self._thread.is_alive():
            self._device.kill_on_device(self.pid)
            self._thread.join(10)
        self._close_stderr()

    def samples(self) -> Samples | None:
        return self._samples

    def peak_rss_kb(self):
        hwm = [v for v in (self._samples.hwm_kb if self._samples else []) if v is not None]
        return max(hwm) if hwm else None

    def cpu_seconds(self):
        return None  # not attributed on a phone: the cold protocol gates before each run there

    def bytes_read(self):
        return None


@dataclass
class AndroidConfig(DeviceConfig):
    """conf/device/android.yaml (docs/android.md): how to reach the phone, eviction, and its on-device sampler."""

    adb_address: str | None = None  # over TCP: "host:port"
    serial: str | None = None  # over USB: the device serial (None = the first one found)
    remote_dir: str = "/data/local/tmp/edgeflow-bench"
    adb_timeout_s: float = 10.0
    root: str = "auto"  # auto (use su when it works) | su | none: drop_caches needs root, posix_fadvise does not
    sample_interval_ms: float = 20.0  # the sampler's period: within [1, 100] ms, i.e. at least 10 Hz
    pss_every: int = 5  # PSS (smaps_rollup, costlier) every N samples; 0 = never
    power_supply: str = "/sys/class/power_supply/battery"
    current_unit: str = "auto"  # auto | uA | mA (harness/devices/sampling.py explains the heuristics)
    voltage_unit: str = "auto"  # auto | uV | mV | V
    current_sign: str = "auto"  # auto | discharge_positive | discharge_negative
    cpu_thermal_types: str = "cpu|tsens|soc|cluster|apc|big|little|mid"  # regex on thermal_zone*/type

    def __post_init__(self):
        super().__post_init__()
        if self.adb_address is not None and not re.fullmatch(r"[\w.\-]+:\d{1,5}", self.adb_address):
            raise ValueError(f"device.adb_address must be 'host:port', got {self.adb_address!r}")
        self.check([
            ("adb_timeout_s", float(self.adb_timeout_s) > 0, "> 0"),
            ("root", self.root in ("auto", "su", "none"), "one of auto, su, none"),
            ("sample_interval_ms", 1 <= float(self.sample_interval_ms) <= 100, "within [1, 100] ms (>= 10 Hz)"),
            ("pss_every", 0 <= int(self.pss_every) <= 1000, "an integer in [0, 1000]"),
            ("current_unit", self.current_unit in ("auto", "uA", "mA", "A"), "one of auto, uA, mA, A"),
            ("voltage_unit", self.voltage_unit in ("auto", "uV", "mV", "V"), "one of auto, uV, mV, V"),
            ("current_sign", self.current_sign in ("auto", "discharge_positive", "discharge_negative"),
             "one of auto, discharge_positive, discharge_negative"),
            ("remote_dir", self.remote_dir.startswith("/") and "'" not in self.remote_dir, "an absolute path")])
        try:
            re.compile(self.cpu_thermal_types)
        except re.error as e:
            raise ValueError(f"device.cpu_thermal_types must be a regular expression: {e}") from None


@register_device
class AndroidDevice(Device):
    name = "android"
    config_type = AndroidConfig
    samples_on_device = True  # one sampler process per run (harness/measure/cold.py uses its samples)

    def __init__(self, cfg):
        super().__init__(cfg)
        if cfg.flash_read_mbps is not None:
            raise ValueError("device.flash_read_mbps must be null for android: the phone's flash is real, not emulated")
        self._adb = None
        self._manifest: dict[str, tuple[str, int, int]] | None = None  # remote path -> (sha256, size, mtime)
        self._tools: dict[str, str] = {}
        self._rooted: bool | None = None
        self._runs = 0
        self.pushed: list[str] = []  # remote paths pushed (changed) by this device object; the rest were current

    @property
    def address(self) -> str:
        return self.cfg.adb_address or f"usb:{self.cfg.serial or 'first device'}"

    # --- connection ---
    def adb(self):
        """The connection every command and run shares (opened on first use)."""
        if self._adb is None:
            self._adb = self._connect()
        return self._adb

    def _connect(self):
        """A new authenticated ADB connection to the phone."""
        from adb_shell.adb_device import AdbDevice
        from adb_shell.auth.keygen import keygen
        from adb_shell.auth.sign_pythonrsa import PythonRSASigner

        key = Path(os.environ.get("EDGEFLOW_ADB_KEY", Path.home() / ".android" / "adbkey"))
        if not key.is_file():
            key.parent.mkdir(parents=True, exist_ok=True)
            keygen(str(key))
        signer = PythonRSASigner(Path(f"{key}.pub").read_text(), key.read_text())
        try:
            if self.cfg.adb_address:
                host, port = self.cfg.adb_address.rsplit(":", 1)
                dev = AdbDevice(_transport(host, int(port)), default_transport_timeout_s=self.cfg.adb_timeout_s)
            else:
                from adb_shell.adb_device import AdbDeviceUsb  # needs the libusb1 package

                dev = AdbDeviceUsb(serial=self.cfg.serial, default_transport_timeout_s=self.cfg.adb_timeout_s)
            dev.connect(rsa_keys=[signer], auth_timeout_s=self.cfg.adb_timeout_s)
        except Exception as e:
            raise DeviceUnreachable(f"no device reachable at {self.address}: {type(e).__name__}: {e} (is adb "
                                    f"over TCP enabled and this host's key {key}.pub authorized? docs/android.md)"
                                    ) from None
        return dev

    def kill_on_device(self, pid: int) -> None:
        """`kill -9 PID` on a connection of its own: a running engine's stream keeps reading on the shared one, and
        adb-shell serialises reads per connection, so a kill sent there can wait behind them past its timeout."""
        conn = self._connect()
        try:
            out = conn.shell(with_status(shell_command(["kill", "-9", str(int(pid))])), read_timeout_s=60)
        except Exception as e:
            raise DeviceUnreachable(f"the device at {self.address} went away during `kill -9 {pid}`: "
                                    f"{type(e).__name__}: {e}") from None
        finally:
            conn.close()
        code, text = split_rc(out)
        if code not in (0, 1):  # 1: the process had already exited
            raise RuntimeError(f"`kill -9 {pid}` failed on the device at {self.address} (status {code}): {text[-300:]}")

    def _call(self, what: str, fn):
        """fn(adb) with a lost connection reported as DeviceUnreachable naming what was being done."""
        adb = self.adb()
        try:
            return fn(adb)
        except DeviceUnreachable:
            raise
        except Exception as e:
            from adb_shell.exceptions import AdbCommandFailureException

            if isinstance(e, AdbCommandFailureException):  # the phone answered with FAIL: not a lost connection
                raise RuntimeError(f"{what} failed on the device at {self.address}: {e}") from None
            self._adb = None
            raise DeviceUnreachable(f"the device at {self.address} went away during {what}: "
                                    f"{type(e).__name__}: {e}") from None

    # --- commands ---
    def run(self, cmd, env=None, timeout=None, cwd=None) -> Completed:
        line = with_status(shell_command(cmd, cwd, env))
        out = self._call(f"`{shlex.join(cmd)[:80]}`",
                         lambda adb: adb.shell(line, timeout_s=timeout, read_timeout_s=timeout or 60))
        code, text = split_rc(out)
        return Completed(code, text, "")  # shell v1: stderr arrives merged into stdout

    def _sh(self, script: str, timeout: float = 60) -> str:
        """A fixed script of ours (no caller data in it) -> its output."""
        return self._call("a status query", lambda adb: adb.shell(script, read_timeout_s=timeout))

    def spawn(self, cmd, env=None, cwd=None) -> AndroidProcess:
        self._runs += 1
        run_dir = f"{self.cfg.remote_dir}/run"
        tag = f"{os.getpid()}-{self._runs}"
        samples, stderr = f"{run_dir}/samples-{tag}.txt", f"{run_dir}/stderr-{tag}.txt"
        sampler = self.tool("sampler_tool")
        facts = self.facts()
        ps = self.cfg.power_supply
        sampler_cmd = [sampler, "--out", samples, "--interval-ms", str(int(self.cfg.sample_interval_ms)),
                       "--pss-every", str(int(self.cfg.pss_every)), "--current", f"{ps}/current_now",
                       "--voltage", f"{ps}/voltage_now", "--temp", f"battery={ps}/temp"]
        for zone, kind in facts["cpu_thermal_zones"].items():
            sampler_cmd += ["--temp", f"{kind}={zone}/temp"]
        engine = shlex.join(cmd)
        if env:
            engine = "env " + " ".join(f"{k}={shlex.quote(str(v))}" for k, v in env.items() if _env_name(k)) + " " + engine
        script = (f"mkdir -p {shlex.quote(run_dir)} && "
                  + (f"cd {shlex.quote(cwd)} && " if cwd else "")
                  # In a subshell that ignores SIGHUP: adbd hangs up the terminal's process group when the stream
                  # ends, and the sampler must outlive the engine to write its last line ($$ is still the engine's).
                  + f"echo __pid=$$ && {{ ( trap '' HUP; exec {shlex.join(sampler_cmd)} --pid $$ ) "
                  "</dev/null >/dev/null 2>&1 & } && "
                  f"exec {engine} 2>{shlex.quote(stderr)}")
        line = f"sh -c {shlex.quote(script)} </dev/null; echo {_RC}$?"
        return AndroidProcess(self, line, samples, stderr)

    # --- files ---
    def read_file(self, remote: str, missing_ok: bool = False) -> bytes:
        if missing_ok and not self._call(f"stat {remote}", lambda adb: adb.stat(remote))[0]:
            return b""
        with tempfile.TemporaryDirectory() as d:
            local = Path(d) / "f"
            self._call(f"pulling {remote}", lambda adb: adb.pull(remote, str(local)))
            return local.read_bytes()

    def _load_manifest(self) -> dict:
        if self._manifest is None:
            self._manifest = {}
            path = f"{self.cfg.remote_dir}/.manifest"
            mode, _, _ = self._call("stat", lambda adb: adb.stat(path))
            if mode:
                for line in self.read_file(path).decode("utf-8", "replace").splitlines():
                    parts = line.split(" ", 3)
                    if len(parts) == 4:
                        self._manifest[parts[3]] = (parts[0], int(parts[1]), int(parts[2]))
        return self._manifest

    def push(self, local, remote) -> str:
        """Push `local` to `remote` unless the phone already holds this content there (the manifest's hash, and the
        phone's own size and mtime for it)."""
        if "\n" in remote:
            raise ValueError(f"remote path has a newline: {remote!r}")
        manifest = self._load_manifest()
        digest = _sha256(Path(local))
        mode, size, mtime = self._call(f"stat {remote}", lambda adb: adb.stat(remote))
        if manifest.get(remote) == (digest, size, mtime) and mode:
            return remote
        st_mode = 0o100755 if os.access(local, os.X_OK) else 0o100644
        self._call(f"pushing {local}", lambda adb: adb.push(str(local), remote, st_mode=st_mode,
                                                              mtime=int(os.path.getmtime(local)),
                                                              read_timeout_s=600))
        _, size, mtime = self._call(f"stat {remote}", lambda adb: adb.stat(remote))
        manifest[remote] = (digest, size, mtime)
        self.pushed.append(remote)
        with tempfile.NamedTemporaryFile("w", suffix=".manifest") as f:
            f.write("".join(f"{h} {s} {m} {p}\n" for p, (h, s, m) in sorted(manifest.items())))
            f.flush()
            self._call("writing the manifest", lambda adb: adb.push(f.name, f"{self.cfg.remote_dir}/.manifest"))
        return remote

    def pull(self, remote, local) -> str:
        self._call(f"pulling {remote}", lambda adb: adb.pull(remote, str(local)))
        return str(local)

    def tool(self, name: str) -> str:
        """One of our static aarch64 tools on the phone (pushed when missing or changed)."""
        if name not in self._tools:
            self._tools[name] = self.push(device_tool(name), f"{self.cfg.remote_dir}/bin/{name}")
        return self._tools[name]

    # --- page cache ---
    def rooted(self) -> bool:
        if self._rooted is None:
            if self.cfg.root == "none":
                self._rooted = False
            else:
                ok = any(self.run(["su", *form, "echo __su_ok"]).stdout.strip().endswith("__su_ok")
                         for form in (["-c"], ["0", "sh", "-c"]))
                if self.cfg.root == "su" and not ok:
                    raise RuntimeError(f"device.root=su but `su` does not work on {self.address} (is the phone "
                                       f"rooted and the shell granted root? use device.root=auto or none)")
                self._rooted = ok
        return self._rooted

    @property
    def eviction_method(self) -> str:
        return "drop_caches through su" if self.rooted() else "posix_fadvise(DONTNEED) through pagecache_tool"

    def _pagecache(self, verb: str, paths) -> float:
        res = self.run([self.tool("pagecache_tool"), verb, *paths])
        if res.returncode != 0:
            raise RuntimeError(f"pagecache_tool {verb} failed on the phone: {res.stdout}")
        return parse_residency(res.stdout)

    def evict(self, paths) -> float:
        if self.rooted():
            res = self.run(["su", "-c", "sync; echo 3 > /proc/sys/vm/drop_caches"])
            if res.returncode == 0:
                return self._pagecache("resident", paths)
        return self._pagecache("evict", paths)

    def resident_fraction(self, paths) -> float:
        return self._pagecache("resident", paths)

    def preload(self, paths, fraction: float) -> float:
        return self._pagecache("preload", [f"{float(fraction):.6f}", *paths])

    # --- sensors and facts ---
    def sample_memory(self, pid):
        res = self.run(["cat", f"/proc/{int(pid)}/status"])
        return parse_proc_status(res.stdout) if res.returncode == 0 and "VmRSS" in res.stdout else None

    def load_average(self) -> float:
        return float(self._sh("cat /proc/loadavg").split()[0])

    def temperature_c(self):
        zones = self.facts()["cpu_thermal_zones"]
        if not zones:
            return None, "no CPU thermal zone readable on the phone"
        out = self._sh("; ".join(f"cat {shlex.quote(z + '/temp')} 2>/dev/null || echo -" for z in zones))
        temps = [celsius(float(v)) for v in out.split() if re.fullmatch(r"-?\d+", v)]
        return (max(temps), None) if temps else (None, "the CPU thermal zones gave no reading")

    def power_source(self):
        return None, "on a phone, power is sampled on the device (battery current_now x voltage_now)"

    @property
    def loopback(self) -> bool:
        return self.facts()["props"].get("ro.edgeflow.loopback") == "1"

    @property
    def timing_label(self) -> str:
        return "emulated" if self.loopback else "measured"  # the loopback: aarch64 under qemu on the host

    @property
    def sensor_label(self) -> str:
        return "stand-in" if self.loopback else "measured"  # the loopback's battery and thermal files are scripted

    def facts(self) -> dict:
        """What the phone is, read once per sweep (process) and address: properties, kernel, governors, storage,
        thermal zones, battery status."""
        if self.address in _FACTS:
            return _FACTS[self.address]
        props = {}
        for line in self._sh("getprop").splitlines():
            m = re.match(r"\[(.*?)\]: \[(.*)\]", line)
            if m:
                props[m.group(1)] = m.group(2)
        zones_out = self._sh("for z in /sys/class/thermal/thermal_zone*; do "
                             "[ -r \"$z/temp\" ] && echo \"$z $(cat \"$z/type\" 2>/dev/null)\"; done")
        zones = dict(line.split(" ", 1) for line in zones_out.splitlines() if " " in line)
        cpu = {z: t for z, t in zones.items() if re.search(self.cfg.cpu_thermal_types, t, re.I)}
        gov = self._sh("for p in /sys/devices/system/cpu/cpufreq/policy*; do "
                       "echo \"${p##*/}=$(cat \"$p/scaling_governor\" 2>/dev/null)\"; done")
        facts = {
            "props": props, "kernel": self._sh("uname -a").strip(),
            "cores": int((self._sh("nproc").strip() or "0").split()[0]),
            "governors": ",".join(g for g in gov.split() if "=" in g and not g.startswith("policy*")),
            "storage": self._sh("grep ' /data ' /proc/mounts | head -1; getprop ro.boot.bootdevice").strip(),
            "battery_status": self._sh(f"cat {shlex.quote(self.cfg.power_supply + '/status')} 2>/dev/null").strip(),
            "cpu_thermal_zones": cpu or zones,
        }
        _FACTS[self.address] = facts
        return facts

    def info(self) -> dict:
        f = self.facts()
        p = f["props"]
        return {"device": self.name, "address": self.address, "model": p.get("ro.product.model", ""),
                "manufacturer": p.get("ro.product.manufacturer", ""),
                "soc": p.get("ro.soc.model") or p.get("ro.board.platform", ""),
                "soc_manufacturer": p.get("ro.soc.manufacturer", ""), "android": p.get("ro.build.version.release", ""),
                "kernel": f["kernel"], "cores": f["cores"], "governors": f["governors"], "storage": f["storage"],
                "battery_status": f["battery_status"], "thermal_zones": sorted(f["cpu_thermal_zones"].values()),
                "eviction": self.eviction_method, "loopback": self.loopback, "flash_emulated_mbps": None,
                "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}

    def close(self):
        if self._adb is not None:
            try:
                self._adb.close()
            except Exception:
                pass
            self._adb = None


def parse_residency(text: str) -> float:
    """Fraction from pagecache_tool's "<resident pages> <total pages>" line."""
    m = re.fullmatch(r"\s*(\d+) (\d+)\s*", text)
    if not m:
        raise RuntimeError(f"unexpected pagecache_tool output: {text!r}")
    resident, total = int(m.group(1)), int(m.group(2))
    return resident / total if total else 0.0


_HASHES: dict[tuple, str] = {}


def _sha256(path: Path) -> str:
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key not in _HASHES:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
        _HASHES[key] = h.hexdigest()
    return _HASHES[key]
