"""What can be tested without a phone: command construction, output parsing, the helper built for aarch64 (run under
qemu), and a clear error when no phone answers."""
import shutil
import subprocess

import pytest

from harness.devices import DeviceConfig, get_device
from harness.devices.android import AndroidConfig
from harness.devices.android import (DeviceUnreachable, pagecache_tool_binary, parse_residency, shell_command,
                                     split_rc, with_status)


def test_shell_command_quotes_and_reports_the_exit_status():
    line = shell_command(["./demo", "-m", "model file.mllm"], cwd="/data/local/tmp/x y", env={"LD_LIBRARY_PATH": "."})
    assert line == "cd '/data/local/tmp/x y' && LD_LIBRARY_PATH=. ./demo -m 'model file.mllm'"
    # stderr of the whole line (cd included) is merged, and the status echo comes after it, unredirected
    assert with_status("cmd") == "{ cmd; } 2>&1; echo __edgeflow_rc=$?"
    assert split_rc("hello\nworld\n__edgeflow_rc=3\n") == (3, "hello\nworld\n")
    with pytest.raises(RuntimeError, match="no exit status"):
        split_rc("truncated output")


def test_residency_parsing():
    assert parse_residency("5 20\n") == 0.25
    assert parse_residency("0 0") == 0.0
    with pytest.raises(RuntimeError, match="unexpected"):
        parse_residency("mincore: permission denied")


def test_no_phone_gives_a_clear_error():
    dev = get_device({"name": "android", "adb_address": "127.0.0.1:9", "adb_timeout_s": 2})
    with pytest.raises(DeviceUnreachable, match="no device reachable at 127.0.0.1:9"):
        dev.load_average()


def test_flash_emulation_is_refused_on_a_phone():
    with pytest.raises(ValueError, match="flash_read_mbps must be null for android"):
        get_device(AndroidConfig(name="android", adb_address="127.0.0.1:5555", flash_read_mbps=200))


@pytest.mark.skipif(not shutil.which("aarch64-linux-gnu-gcc") or not shutil.which("qemu-aarch64-static"),
                    reason="needs g++-aarch64-linux-gnu and qemu-user-static (make system-deps)")
def test_pagecache_tool_for_the_phone_evicts_under_qemu(tmp_path):
    tool = pagecache_tool_binary()
    f = tmp_path / "w.bin"
    f.write_bytes(b"\1" * 40000)  # 10 pages of 4 KiB
    f.read_bytes()
    run = lambda *a: subprocess.run(["qemu-aarch64-static", str(tool), *a], capture_output=True, text=True)
    assert run("resident", str(f)).stdout == "10 10\n"
    assert run("evict", str(f)).stdout == "0 10\n"
    bad = run("evict", str(tmp_path / "missing"))
    assert bad.returncode == 2 and "missing" in bad.stderr
    assert run("preload", "0.5", str(f)).stdout == "5 10\n"  # the first half, no readahead past it
    bad = run("preload", "1.5", str(f))
    assert bad.returncode == 2 and "fraction must be a number in [0, 1]" in bad.stderr


@pytest.mark.parametrize("key,value,allowed", [("sample_interval_ms", 500, "10 Hz"), ("root", "maybe", "auto, su"),
                                               ("current_unit", "nA", "uA"), ("max_temp_c", 400, "150")])
def test_bad_android_settings_name_the_key(key, value, allowed):
    with pytest.raises(ValueError, match=f"device.{key} must be .*{allowed}"):
        AndroidConfig(name="android", adb_address="127.0.0.1:5555", **{key: value})
