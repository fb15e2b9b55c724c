"""The phone side of QNN: without the QAIRT SDK or a phone the rows say why; with an SDK its files and the compiled
layers reach the phone over the real adb protocol (the loopback adbd) and qnn-net-run's failure is reported in its
own words. No profile is made up: the parser is tested on text in qnn-profile-viewer's format."""
import pytest

from harness.npu.config import load_npu_config
from harness.npu.phone import parse_profile, sdk_device_files
from harness.npu.htp import unavailable_reason
from harness.runner.job import run_job
from harness.runner.store import ResultsStore
from harness.runner.sweep import compose_config
from tests.devices.loopback_fixtures import authorized_loopback

VIEWER_TEXT = """Execute Stats (Average):
Execute Stat 1
    Number of HVX threads used : 4 count
    RPC (execute) time : 2100 us
    QNN accelerator (execute) time : 1800 us
    Accelerator (execute) time (cycles) : 1900000 cycles
    Input OpId_2 (cycles) : 0 cycles
    layer0_q_proj:OpId_11 (cycles) : 300000 cycles
    layer0_k_proj:OpId_12 (cycles) : 100000 cycles
    layer0_down_proj:OpId_17 (cycles) : 600000 cycles
Execute Stat 2
    QNN accelerator (execute) time : 2200 us
    layer0_q_proj:OpId_11 (cycles) : 300000 cycles
"""


def test_the_viewer_text_gives_mean_execute_time_and_cycles_per_operator():
    p = parse_profile(VIEWER_TEXT)
    assert p.execute_us == 2000
    assert p.op_cycles == {"layer0_q_proj": 600000, "layer0_k_proj": 100000, "layer0_down_proj": 600000}
    with pytest.raises(ValueError, match="profiling_level"):
        parse_profile("Init Stats:\n    NetRun: 12 us\n")


def test_the_sdk_files_follow_the_socs_htp_generation():
    files = sdk_device_files(load_npu_config("sm8650"))
    assert files["libQnnHtpV75Skel.so"] == "lib/hexagon-v75/unsigned/libQnnHtpV75Skel.so"
    assert files["qnn-net-run"] == "bin/aarch64-android/qnn-net-run"


needs_htp = pytest.mark.skipif(bool(unavailable_reason()), reason=unavailable_reason() or "")
REMOTE = "/data/local/tmp/eb-npu"


@pytest.fixture
def phone(tmp_path, monkeypatch):
    with authorized_loopback(tmp_path, monkeypatch) as adbd:
        yield adbd


def fake_sdk(root, npu_name="sm8750"):
    """A folder laid out like a QAIRT SDK whose qnn-net-run fails as it would on a phone without a Hexagon DSP."""
    for rel in sdk_device_files(load_npu_config(npu_name)).values():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(f"stand-in for {rel}\n".encode())
    runner = root / "bin/aarch64-android/qnn-net-run"
    runner.write_text("#!/bin/sh\necho 'qnn-net-run: failed to open libcdsprpc.so: no Hexagon DSP here' >&2\nexit 3\n")
    runner.chmod(0o755)
    viewer = root / "bin/x86_64-linux-clang/qnn-profile-viewer"
    viewer.parent.mkdir(parents=True, exist_ok=True)
    viewer.write_text("#!/bin/sh\nexit 1\n")
    viewer.chmod(0o755)
    return root


def points(tiny_checkpoint, *extra):
    return ["experiment=npu_profile", "model.name=tiny-npu-test", f"model.path={tiny_checkpoint}", "model.source=hf",
            "quantizer=edgeflow", "quantizer.budget_bits=6", *extra]


@pytest.mark.real_model
@needs_htp
def test_without_a_phone_or_the_sdk_the_row_says_why(tmp_path, tiny_checkpoint, phone):
    store = ResultsStore(tmp_path / "runs")
    assert run_job(compose_config(points(tiny_checkpoint)), store) == "not run"
    assert "needs a Qualcomm phone" in store.read("npu_profile").iloc[-1]["error"]
    android = ["device=android", f"device.adb_address={phone.address}", f"device.remote_dir={REMOTE}"]
    assert run_job(compose_config(points(tiny_checkpoint, *android)), store) == "not run"
    assert "needs the QAIRT SDK" in store.read("npu_profile").iloc[-1]["error"]
    partial = tmp_path / "partial-sdk"
    (partial / "bin/aarch64-android").mkdir(parents=True)
    (partial / "bin/aarch64-android/qnn-net-run").write_text("")
    assert run_job(compose_config(points(tiny_checkpoint, *android, "npu=sm8750", f"npu.qairt_root={partial}")),
                   store) == "not run"
    assert "lacks lib/aarch64-android/libQnnHtp.so" in store.read("npu_profile").iloc[-1]["error"]


@pytest.mark.real_model
@needs_htp
def test_the_sdk_and_layers_are_pushed_and_a_failing_run_reports_its_words(tmp_path, tiny_checkpoint, phone):
    sdk = fake_sdk(tmp_path / "qairt")
    store = ResultsStore(tmp_path / "runs")
    cfg = compose_config(points(tiny_checkpoint, "npu=sm8750", f"npu.qairt_root={sdk}", "device=android",
                                f"device.adb_address={phone.address}", f"device.remote_dir={REMOTE}"))
    assert run_job(cfg, store) == "failed"
    error = store.read("npu_profile").iloc[-1]["error"]
    assert "qnn-net-run failed on the phone for layer0 (exit 3)" in error and "no Hexagon DSP" in error
    for name, rel in sdk_device_files(load_npu_config("sm8750")).items():
        assert phone.sandbox.host_path(f"{REMOTE}/qnn/{name}").read_bytes() == (sdk / rel).read_bytes()
    pushed = phone.sandbox.host_path(f"{REMOTE}/qnn/layer0.bin")
    assert pushed.stat().st_size > 10_000  # the compiled context binary
    inputs = phone.sandbox.host_path(f"{REMOTE}/qnn/layer0.inputs.txt").read_text()
    assert inputs.startswith(f"x0:={REMOTE}/qnn/layer0.x0.raw")
