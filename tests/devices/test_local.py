import sys

import pytest

from harness.devices import DeviceConfig, get_device
from harness.devices.android import AndroidConfig
from harness.devices.base import parse_proc_status

STATUS = """Name:\tllama-completion
State:\tS (sleeping)
VmPeak:\t  612340 kB
VmHWM:\t  411724 kB
VmRSS:\t  402066 kB
Threads:\t3
"""


def test_proc_status_parsing():
    assert parse_proc_status(STATUS) == {"rss_kb": 402066, "hwm_kb": 411724}
    with pytest.raises(ValueError, match="VmRSS"):
        parse_proc_status("Name:\tzombie\nState:\tZ (zombie)\n")


def test_config_validation_names_the_key():
    with pytest.raises(ValueError, match="device.name"):
        DeviceConfig(name="phone")
    with pytest.raises(ValueError, match="device.flash_read_mbps"):
        DeviceConfig(name="local", flash_read_mbps=0)
    with pytest.raises(ValueError, match="device.adb_address"):
        AndroidConfig(name="android", adb_address="no-port")
    with pytest.raises(ValueError, match=r"device: unknown key\(s\) \['adb_address'\]"):
        get_device({"name": "local", "adb_address": "10.0.0.7:5555"})  # a phone's key is no host key


def test_spawned_process_is_sampled_and_reaped_with_its_peak_rss():
    dev = get_device({"name": "local", "flash_read_mbps": None})
    code = "import sys, time; b = bytearray(64 << 20); sys.stdout.write('tok'); sys.stdout.flush(); time.sleep(1)"
    proc = dev.spawn([sys.executable, "-c", code])
    assert proc.stdout.read(3) == b"tok"
    mem = dev.sample_memory(proc.pid)
    assert mem["rss_kb"] > 64 * 1024 and mem["hwm_kb"] >= mem["rss_kb"]
    assert proc.wait(timeout=10) == 0
    assert proc.peak_rss_kb() > 64 * 1024
    assert proc.bytes_read() is not None
    assert dev.sample_memory(proc.pid) is None


def test_info_and_power_are_honest():
    dev = get_device({"name": "local"})
    info = dev.info()
    assert info["cores"] >= 1 and info["cpu"] and info["kernel"] and info["flash_emulated_mbps"] is None
    reader, reason = dev.power_source()
    assert (reader is None) != (reason is None)
    if reader:
        assert reader() >= 0
    assert dev.load_average() >= 0
