"""The Android device against the loopback adbd: commands without shell injection, the push manifest, eviction
(fadvise and rooted drop_caches), the on-device sampler (memory, power, temperature, energy), the thermal gate,
killing a hung engine on the device, and a phone vanishing mid-run."""
import os
import shutil
import time

import pytest

from harness.devices import get_device
from harness.devices.android import DeviceUnreachable
from harness.devices.loopback import LoopbackAdbd
from harness.measure.cold import DeviceHot, EngineError, ProtocolConfig, run_once
from tests.devices.loopback_fixtures import make_keys

pytestmark = pytest.mark.skipif(not shutil.which("aarch64-linux-gnu-gcc") or not shutil.which("qemu-aarch64-static"),
                                reason="the phone's tools are aarch64: needs g++-aarch64-linux-gnu and qemu-user-static")
HOSTILE = "it's $(touch pwned) `id`; a\"b & c | d > e \\ *.bin"
REMOTE = "/data/local/tmp/eb"


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    return make_keys(tmp_path_factory.mktemp("keys"))


@pytest.fixture
def phone(tmp_path, keys, monkeypatch):
    monkeypatch.setenv("EDGEFLOW_ADB_KEY", str(keys[0]))
    with LoopbackAdbd(tmp_path / "phone", authorized_keys=(keys[1],)) as adbd:
        yield adbd


def android(adbd, **cfg):
    from harness.devices import android as mod

    mod._FACTS.clear()  # facts are per sweep; each test's loopback is a new phone on a new port anyway
    return get_device({"name": "android", "adb_address": adbd.address, "remote_dir": REMOTE, "adb_timeout_s": 5,
                       "max_temp_c": 40, **cfg})


def fast_protocol(**kw):
    return ProtocolConfig(**{"repetitions": 1, "warmup_runs": 0, "busy_policy": "flag", **kw})


def test_commands_reach_the_shell_as_literal_words(phone, tmp_path):
    dev = android(phone)
    assert dev.run(["echo", HOSTILE]).stdout == HOSTILE + "\n"
    assert dev.run(["printf", "%s|", "a b", "", "c"], env={"X": HOSTILE}).stdout == "a b||c|"
    assert dev.run(["sh", "-c", 'echo "$X"'], env={"X": HOSTILE}).stdout == HOSTILE + "\n"
    assert dev.run(["sh", "-c", "exit 3"]).returncode == 3
    missing = dev.run(["ls", "/data/local/tmp/nope"], cwd="/data/local/tmp")  # stderr of the command, not of echo
    assert missing.returncode != 0 and "nope" in missing.stdout
    assert not list(phone.sandbox.root.rglob("pwned")) and not (tmp_path / "pwned").exists()
    with pytest.raises(ValueError, match="environment variable name"):
        dev.run(["true"], env={"A;rm": "x"})


def test_push_sends_only_what_changed(phone, tmp_path):
    dev = android(phone)
    f = tmp_path / HOSTILE
    f.write_bytes(b"weights" * 1000)
    remote = f"{REMOTE}/models/{HOSTILE}"
    dev.push(f, remote)
    dev.push(f, remote)
    assert dev.pushed == [remote]
    again = android(phone)  # a new sweep reads the manifest from the phone
    again.push(f, remote)
    assert again.pushed == []
    f.write_bytes(b"other" * 1000)  # new content
    again.push(f, remote)
    phone.sandbox.host_path(remote).write_bytes(b"tampered on the phone")  # the phone's copy changed
    again.push(f, remote)
    assert again.pushed == [remote, remote]
    assert phone.sandbox.host_path(remote).read_bytes() == f.read_bytes()


@pytest.mark.parametrize("rooted", [False, True])
def test_eviction_is_verified_with_either_method(tmp_path, keys, monkeypatch, rooted):
    monkeypatch.setenv("EDGEFLOW_ADB_KEY", str(keys[0]))
    with LoopbackAdbd(tmp_path / "phone", authorized_keys=(keys[1],), rooted=rooted) as adbd:
        dev = android(adbd)
        f = tmp_path / "m.bin"
        f.write_bytes(os.urandom(64 * 4096))
        remote = dev.push(f, f"{REMOTE}/models/{HOSTILE}")
        adbd.sandbox.host_path(remote).read_bytes()
        assert dev.resident_fraction([remote]) == 1.0
        assert dev.evict([remote]) == 0.0
        assert dev.eviction_method.startswith("drop_caches" if rooted else "posix_fadvise")


def test_sampler_gives_memory_power_temperature_and_energy(phone):
    dev = android(phone)
    info = dev.info()
    assert info["model"] == "EdgeFlow loopback adbd" and info["loopback"] and "schedutil" in info["governors"]
    assert (dev.timing_label, dev.sensor_label) == ("emulated", "stand-in")
    # the engine: allocate ~40 MB, print a token at ~0.6 s, stay alive a little longer
    cmd = ["sh", "-c", "x=$(head -c 40000000 /dev/zero | tr '\\0' a); sleep 0.3; echo tok; sleep 0.3"]
    run = run_once(dev, cmd, [dev.tool("sampler_tool")], lambda out: b"tok" in out, 60, fast_protocol())
    assert run.sample_rate_hz >= 10
    assert max(r for _, r in run.rss_timeline) > 40_000  # kB: the string held by the shell
    assert run.pss_timeline and run.temp_before_c == 37.5 and run.temp_peak_c == 37.5
    watts = 0.42 * 3.95  # the loopback's scripted -420000 uA x 3950000 uV, discharge negative
    assert run.avg_power_w == pytest.approx(watts, rel=1e-3)
    assert run.energy_j == pytest.approx(watts * run.ttft_s, rel=1e-3)
    assert any("discharge reported negative (auto)" in n for n in run.notes)


def test_charging_phone_reports_no_energy(tmp_path, keys, monkeypatch):
    monkeypatch.setenv("EDGEFLOW_ADB_KEY", str(keys[0]))
    sensors = {"/sys/class/power_supply/battery/status": "Charging"}
    with LoopbackAdbd(tmp_path / "phone", authorized_keys=(keys[1],), sensors=sensors) as adbd:
        dev = android(adbd)
        run = run_once(dev, ["sh", "-c", "echo tok; sleep 0.5"], [dev.tool("sampler_tool")], lambda o: b"tok" in o,
                       60, fast_protocol())
        assert run.energy_j is None and "charging" in run.energy_reason and run.rss_timeline


def test_thermal_gate_waits_for_the_phone_to_cool(phone):
    dev = android(phone)
    phone.sandbox.set_sensor("/sys/class/thermal/thermal_zone1/temp", 55_000)
    dev.cfg.thermal_wait_s = 0.5
    with pytest.raises(DeviceHot, match="55.0 C > device.max_temp_c=40"):
        run_once(dev, ["echo", "tok"], [dev.tool("sampler_tool")], lambda o: b"tok" in o, 60, fast_protocol())
    dev.cfg.thermal_wait_s = 30
    deadline = time.monotonic() + 1.5
    phone.sandbox.set_sensor("/sys/class/thermal/thermal_zone1/temp",
                             lambda t: 55_000 if time.monotonic() < deadline else 38_000)
    run = run_once(dev, ["echo", "tok"], [dev.tool("sampler_tool")], lambda o: b"tok" in o, 60, fast_protocol())
    assert run.temp_before_c == 38.0 and time.monotonic() >= deadline


def test_a_hung_engine_is_killed_on_the_device(phone):
    dev = android(phone)
    seconds = f"{60 + os.getpid() % 1000 / 1000:.3f}"  # a sleep no other process on this host runs
    with pytest.raises(EngineError, match="timed out"):
        run_once(dev, ["sleep", seconds], [dev.tool("sampler_tool")], lambda o: b"tok" in o, 1.5, fast_protocol())
    assert not processes_running(["sleep", seconds])  # none left on the phone (the loopback's processes are ours)


def processes_running(argv: list[str]) -> list[int]:
    """Pids on this host whose command line is exactly `argv`."""
    want = "\0".join(argv).encode() + b"\0"
    pids = []
    for d in os.listdir("/proc"):
        try:
            if d.isdigit() and open(f"/proc/{d}/cmdline", "rb").read() == want:
                pids.append(int(d))
        except OSError:
            pass
    return pids


def test_a_phone_vanishing_mid_run_is_a_clear_error(phone):
    dev = android(phone)
    tool = dev.tool("sampler_tool")
    phone.vanish_when(lambda service: "kill" in service or "pgrep" in service)

    def first_token(out):
        if b"tok" in out:
            phone.go_offline()  # gone right after the first token
        return b"tok" in out
    with pytest.raises(DeviceUnreachable, match="went away"):
        run_once(dev, ["sh", "-c", "echo tok; sleep 30"], [tool], first_token, 60, fast_protocol())
    with pytest.raises(DeviceUnreachable, match="no device reachable"):
        android(phone).load_average()
