"""The per-device exclusive lock of TTFT jobs (harness/devices/lock.py): same device waits, other devices do not,
a crashed holder leaves no stale lock, the wait is bounded and names the holder."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from harness.devices import DeviceConfig
from harness.devices.android import AndroidConfig
from harness.devices.lock import DeviceBusy, device_key, device_lock
from harness.runner.job import run_job
from harness.runner.store import ResultsStore
from harness.runner.sweep import compose_config

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def hold_in_child(folder, key, ready):
    """A process that takes the lock of `key`, says so by creating `ready`, and holds it until killed."""
    code = textwrap.dedent(f"""
        import pathlib, time
        from harness.devices.lock import device_lock
        with device_lock({key!r}, pathlib.Path({str(folder)!r}), timeout_s=30):
            pathlib.Path({str(ready)!r}).touch()
            time.sleep(600)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": REPO},
                            stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not ready.exists():
        assert proc.poll() is None and time.monotonic() < deadline, "the lock holder did not start"
        time.sleep(0.05)
    return proc


def test_same_device_waits_other_device_does_not_and_a_killed_holder_releases(tmp_path):
    folder = tmp_path / "locks"
    holder = hold_in_child(folder, "pseudo-a", tmp_path / "ready")
    try:
        with pytest.raises(DeviceBusy, match=rf"device pseudo-a is still in use .*\"pid\": {holder.pid}"):
            with device_lock("pseudo-a", folder, timeout_s=0.5):
                pass
        with device_lock("pseudo-b", folder, timeout_s=0) as held:  # another device: no wait at all
            assert held.key == "pseudo-b" and held.waited_s < 0.5
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    with device_lock("pseudo-a", folder, timeout_s=10) as held:  # the kernel released the dead holder's lock
        assert held.released is None
    assert held.released >= held.acquired and "pseudo-a held exclusively from" in held.describe()


def test_device_keys():
    assert device_key(DeviceConfig(name="local")).startswith("local@")
    assert device_key(DeviceConfig(name="local", id="pseudo-a")) == "pseudo-a"
    assert device_key(AndroidConfig(name="android", adb_address="10.0.0.7:5555")) == "android@10.0.0.7:5555"
    with pytest.raises(ValueError, match="device.id must be"):
        DeviceConfig(name="local", id="two words")


def test_a_named_device_names_its_rows(tmp_path):
    store = ResultsStore(tmp_path)
    cfg = compose_config(["experiment=ttft", "system=llmnpu", "+device.id=pseudo-a", "protocol.repetitions=1",
                          "protocol.warmup_runs=0", f"run.device_lock_dir={tmp_path / 'locks'}"])
    assert run_job(cfg, store) == "not run"
    assert list(store.read("ttft")["device"]) == ["pseudo-a"]
    assert list((tmp_path / "locks").glob("pseudo-a-*.lock"))  # the job took the device's lock
