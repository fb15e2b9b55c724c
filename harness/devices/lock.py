"""Exclusive use of a device for cold-start measurements: one lock file per device in a shared folder.

Two cold starts on the same device at once would each time the other's flash reads and compute, so every TTFT job
holds its device for its whole run (prepare, warm-up, every repetition). Jobs on different devices run side by side.
The lock is a POSIX record lock (`fcntl.lockf`) on `<folder>/<device key>.lock`:
- it works for processes on one machine (joblib pools, two shells) and, with the folder on a shared filesystem that
  supports POSIX locks (NFSv4, Lustre with `-o flock`, GPFS), for SLURM tasks on different nodes;
- the kernel (or the lock manager) releases it when the holder exits, crashes, or is cancelled: no stale locks;
- a waiting job polls, so the wait is bounded (`run.device_lock_timeout_s`), and the error names the holder.

The device key is `device.id` when given (`+device.id=phone-a`: a name for that phone, unique in the lock folder),
else the device type with where it is: `local@<hostname>` (so local jobs on one host never overlap),
`android@<adb address or serial>`. Rows carry the key in their `device` column when `device.id` is set.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import platform
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping

LOCK_DIR_ENV = "EDGEFLOW_DEVICE_LOCKS"


class DeviceBusy(RuntimeError):
    """Another job held the device for longer than the lock timeout."""


def device_key(cfg) -> str:
    """The identity a device is locked by (see the module docstring); `cfg` is a DeviceConfig or a config node."""
    def get(key):
        return cfg.get(key) if isinstance(cfg, Mapping) else getattr(cfg, key, None)
    if get("id"):
        return str(get("id"))
    if get("name") == "local":
        return f"local@{platform.node()}"
    return f"{get('name')}@{get('adb_address') or get('serial') or 'usb'}"  # no address or serial: the USB phone


def lock_folder(configured: str | None = None) -> Path:
    """`run.device_lock_dir`, else $EDGEFLOW_DEVICE_LOCKS, else <cache>/device-locks."""
    if configured:
        return Path(configured).expanduser()
    if os.environ.get(LOCK_DIR_ENV):
        return Path(os.environ[LOCK_DIR_ENV]).expanduser()
    from harness.cache import cache_dir

    return cache_dir("device-locks")


def lock_path(folder: Path, key: str) -> Path:
    # A readable name plus a short hash of the exact key, so keys differing only in odd characters stay apart.
    safe = re.sub(r"[^A-Za-z0-9._@-]", "_", key)[:80]
    return folder / f"{safe}-{hashlib.sha256(key.encode()).hexdigest()[:8]}.lock"


@dataclass
class Held:
    """A held (later released) device lock. Times are Unix seconds (time.time), comparable across processes."""

    key: str
    path: Path
    waited_s: float
    acquired: float
    released: float | None = None

    def describe(self) -> str:
        end = f"{self.released:.6f}" if self.released is not None else "(still held)"
        return (f"device {self.key} held exclusively from {self.acquired:.6f} to {end} (unix s) after waiting "
                f"{self.waited_s:.1f} s; lock {self.path}")


def holder_info() -> dict:
    """Who holds a lock, written into the lock file for the error message of a job that waits in vain."""
    job = os.environ.get("SLURM_ARRAY_JOB_ID")
    job = f"{job}_{os.environ.get('SLURM_ARRAY_TASK_ID')}" if job else os.environ.get("SLURM_JOB_ID")
    return {"host": platform.node(), "pid": os.getpid(), "slurm_job": job,
            "since": time.strftime("%Y-%m-%dT%H:%M:%S%z")}


@contextlib.contextmanager
def device_lock(key: str, folder: Path, timeout_s: float, poll_s: float = 0.2) -> Iterator[Held]:
    """Hold the device `key` exclusively for the block; waits at most `timeout_s` (0: do not wait)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = lock_path(folder, key)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    held = None
    try:
        start, deadline = time.time(), time.monotonic() + timeout_s
        while True:
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as e:
                if e.errno not in (errno.EACCES, errno.EAGAIN):
                    raise OSError(e.errno, f"cannot lock {path} for device {key} (does this filesystem support "
                                           f"POSIX locks? set run.device_lock_dir): {e.strerror}") from None
            if time.monotonic() >= deadline:
                raise DeviceBusy(f"device {key} is still in use after {timeout_s:.0f} s (run.device_lock_timeout_s); "
                                 f"holder: {_read_holder(path)}; lock file {path}")
            time.sleep(poll_s)
        acquired = time.time()
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(holder_info()) + "\n").encode(), 0)
        held = Held(key, path, acquired - start, acquired)
        yield held
    finally:
        if held is not None:
            held.released = time.time()
        os.close(fd)  # closing the descriptor releases the lock


def _read_holder(path: Path) -> str:
    try:
        return path.read_text().strip() or "unknown"
    except OSError:
        return "unknown"


@contextlib.contextmanager
def hold_device(cfg) -> Iterator[Held]:
    """The lock of a job's device (cfg: the composed Hydra config), folder and timeout from its `run` group."""
    run = cfg.get("run") or {}
    with device_lock(device_key(cfg.device), lock_folder(run.get("device_lock_dir")),
                     float(run.get("device_lock_timeout_s", 7200))) as held:
        yield held
