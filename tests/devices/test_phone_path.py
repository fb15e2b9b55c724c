"""The whole phone path in CI, against the loopback adbd: `experiment=ttft system=edgeflow device=android` quantizes a
tiny model, pushes the static aarch64 edgeflow-run and the packed file (once: the hash manifest), evicts and verifies
residency on the phone, runs the engine under qemu with the on-device sampler, and writes rows labelled with the
device. A phone vanishing mid-sweep gives failed rows with the reason; rerunning resumes and loses nothing. A hung
engine is killed on the phone."""
import os
import shutil
import subprocess

import pytest

from harness.runner.job import run_job
from harness.runner.store import ResultsStore
from harness.runner.sweep import compose_config, run_sweep
from tests.devices.loopback_fixtures import authorized_loopback

pytestmark = [pytest.mark.real_model,
              pytest.mark.skipif(not shutil.which("aarch64-linux-gnu-g++") or not shutil.which("qemu-aarch64-static"),
                                 reason="needs g++-aarch64-linux-gnu and qemu-user-static (make system-deps)")]
REMOTE = "/data/local/tmp/eb"


@pytest.fixture
def phone(tmp_path, monkeypatch):
    with authorized_loopback(tmp_path, monkeypatch) as adbd:
        yield adbd


def points(adbd, tiny_checkpoint, bits=(4, 5, 6), extra=()):
    base = ["experiment=ttft", "system=edgeflow", "quantizer=edgeflow", "device=android",
            f"device.adb_address={adbd.address}", f"device.remote_dir={REMOTE}", "device.adb_timeout_s=5",
            "model.name=tiny-phone-test", f"model.path={tiny_checkpoint}", "model.source=hf",
            "+experiment.extra.prompt_tokens=24", "+experiment.extra.n_prompts=2", "protocol.repetitions=1",
            "protocol.warmup_runs=0", "protocol.busy_policy=flag", *extra]
    return [[*base, f"quantizer.budget_bits={b}"] for b in bits]


def test_a_sweep_on_the_phone_survives_a_disconnect_and_resumes(phone, tiny_checkpoint, tmp_path):
    store = ResultsStore(tmp_path / "runs")
    spawns = []

    def vanish(service):  # the phone goes away as the 3rd engine run starts (the first of the 2nd configuration)
        if "bin/edgeflow-run" in service and "__pid" in service:
            spawns.append(service)
        return len(spawns) == 3
    phone.vanish_when(vanish)
    counts = run_sweep(points(phone, tiny_checkpoint), store, desc="phone")
    assert counts == {"ok": 1, "failed": 2}
    first = store.read("ttft")
    errors = first[first.status == "failed"]["error"].tolist()
    assert "went away" in errors[0] and "no device reachable" in errors[1]

    binary = phone.sandbox.host_path(f"{REMOTE}/bin/edgeflow-run")
    inode = binary.stat().st_ino
    phone.go_online()
    counts = run_sweep(points(phone, tiny_checkpoint), store, desc="phone, resumed")
    assert counts == {"skipped": 1, "ok": 2}
    assert binary.stat().st_ino == inode  # unchanged on the phone: not pushed again

    df = store.read("ttft")
    kept = df[df.config_hash == first.config_hash.iloc[0]]
    assert len(kept) == len(first[first.config_hash == first.config_hash.iloc[0]])  # nothing measured was lost
    ok = df[df.status == "ok"]
    assert ok.config_hash.nunique() == 3 and set(ok.device) == {"android"}
    ttft = ok[ok.metric == "ttft_s"]
    assert len(ttft) == 6 and (ttft.value > 0).all() and set(ttft.label) == {"emulated"}
    assert (ok[ok.metric == "resident_before"].value <= 0.01).all()  # every run started cold on the phone
    energy = ok[ok.metric == "energy_j"]
    assert set(energy.label) == {"stand-in"}  # the loopback's battery is scripted: a stand-in, never "measured"
    # under qemu the sampler itself boots slowly: a cold start it covers too little of has no energy, with the reason
    # (on a busy host, every one of the six may be so; test_android_loopback checks the energy of a covered run)
    assert ((energy.value > 0) | energy.notes.str.contains("sampler's samples cover")).all()
    assert (ok[ok.metric == "peak_rss_mb"].value > 0).all()
    assert (ok[ok.metric == "temp_before_c"].value == 37.5).all()
    assert '"loopback": true' in ok.device_info.iloc[0] and "EdgeFlow loopback adbd" in ok.device_info.iloc[0]
    assert "eviction: posix_fadvise" in ttft.notes.iloc[0]


def test_a_hung_engine_is_killed_on_the_phone(phone, tiny_checkpoint, tmp_path):
    store = ResultsStore(tmp_path / "runs")
    cfg = compose_config(points(phone, tiny_checkpoint, bits=(5,), extra=["system.timeout_s=0.05"])[0])
    assert run_job(cfg, store) == "failed"
    assert "timed out after 0.05 s" in store.read("ttft").error.dropna().iloc[0]
    left = subprocess.run(["pgrep", "-f", str(phone.sandbox.root) + REMOTE + "/bin/edgeflow-run"],
                          capture_output=True, text=True).stdout
    assert left == "", f"edgeflow-run still running on the phone: pids {left.split()}"
