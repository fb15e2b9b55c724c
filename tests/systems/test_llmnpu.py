import pytest

from harness.devices import get_device
from harness.systems import NotRun, get_system
from harness.systems.llmnpu import demo_metrics, first_token_seen

V2_OUTPUT = (b"[INFO] CPU decode model loaded from: /data/local/tmp/q4.mllm\n"
             b"[INFO] QNN prefill completed: seq_len=211, time=0.84s\n"
             b"\xe9\xb2\xb8"  # the first token's text
             b"[INFO] [Decode step   1] time: 45.10ms, token: x\n[INFO] [Decode step   2] time: 44.90ms, token: y\n")
SUMMARY = "Prefill time        :  840000.00 μs\nDecode time         :   90000.00 μs\nTTFT                :  845000.00 μs\n"


def test_not_run_on_the_local_host_or_without_a_binary():
    system = get_system({"name": "llmnpu"})
    with pytest.raises(NotRun, match="only on an Android phone"):
        system.prepare(None, 8, get_device({"name": "local"}))
    phone = get_device({"name": "android", "adb_address": "127.0.0.1:9"})  # never contacted: fails before
    with pytest.raises(NotRun, match="system.binary is not set"):
        system.prepare(None, 8, phone)


def test_first_token_detection_for_both_demo_generations():
    assert not first_token_seen(b"[INFO] QNN prefill completed: seq_len=211, time=0.84s\n")
    assert first_token_seen(V2_OUTPUT[:V2_OUTPUT.index(b"[INFO] [Decode")])
    assert not first_token_seen(b"Warmup finished.\n[Q] Give me a short introduction\n[A] ")
    assert first_token_seen(b"[Q] Give me a short introduction\n[A] Large")


def test_demo_timings_are_parsed():
    m = {x.name: x.value for x in demo_metrics(V2_OUTPUT + SUMMARY.encode())}
    assert m == {"prompt_tokens": 211, "llmnpu_prefill_s": 0.84, "llmnpu_decode_ms_per_token": pytest.approx(45.0),
                 "llmnpu_decode_s": 0.09, "llmnpu_ttft_s": 0.845}
    assert demo_metrics(b"[A] Large language models are") == []  # the v1 demo prints no timings
