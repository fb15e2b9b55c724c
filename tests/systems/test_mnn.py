import subprocess
import sys

import pytest

from harness.devices import get_device
from harness.measure.cold import EngineError, ProtocolConfig
from harness.systems import get_system
from harness.systems.mnn import engine_metrics, first_token_line
from harness.systems.mnn_export import _RUNNER


def test_first_token_needs_a_complete_line():
    assert not first_token_line(b"The device supports: i8sdot:0\nfirst_token 81")
    assert first_token_line(b"The device supports: i8sdot:0\nfirst_token 8083\n")


def test_driver_timings_are_parsed_and_checked():
    out = (b'first_token 8083\n{"import_s": 0.1, "load_s": 0.3, "tokenize_s": 0.01, "prefill_s": 0.9, '
           b'"mnn_load_us": 280000, "prompt_tokens": 3, "prompt_ids": [5, 6, 7]}\n')
    m = {x.name: x.value for x in engine_metrics(out, b"", [5, 6, 7])}
    assert m == {"mnn_import_s": 0.1, "mnn_load_s": 0.3, "mnn_engine_load_s": 0.28, "mnn_tokenize_s": 0.01,
                 "mnn_prefill_s": 0.9, "prompt_tokens": 3, "tokens_match": 1.0}
    # MNN's tokenizer gave other ids than the workload's: recorded, not hidden
    assert {x.name: x.value for x in engine_metrics(out, b"", [5, 6, 8])}["tokens_match"] == 0.0
    with pytest.raises(EngineError, match="cannot parse") as err:
        engine_metrics(b"first_token 1\n", b"Segmentation fault", [1])
    assert "Segmentation fault" in err.value.stderr_tail


def test_export_guard_disables_the_telemetry_without_installing_anything():
    """In the export subprocess MNN's converter imports with no logger, and pip is never run."""
    code = _RUNNER.split("pkg = sys.argv[1]")[0] + (
        "from MNN.tools import mnnconvert\nassert mnnconvert.mnn_logger is None\n"
        "import importlib.util\nassert importlib.util.find_spec('aliyun') is None or 'aliyun' in sys.modules\nprint('ok')")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().endswith("ok") and "pip install" not in res.stdout + res.stderr


def test_not_run_on_a_phone():
    from harness.systems import NotRun

    with pytest.raises(NotRun, match="llm_demo"):
        get_system({"name": "mnn"}).prepare(None, 8, get_device({"name": "android", "adb_address": "127.0.0.1:9"}))


@pytest.mark.real_model
def test_cold_run_of_the_default_model(default_model_spec):
    """Exports the default model with INT8 weights once (~1-2 min, cached) and runs it cold."""
    device = get_device({"name": "local"})
    system = get_system({"name": "mnn", "threads": 2})
    prepared = system.prepare(default_model_spec, 8, device)
    assert any(f.endswith("llm.mnn.weight") for f in prepared.files)
    from harness.measure.workload import Workload

    from transformers import AutoTokenizer

    from harness.data.prompts import fixed_length_prompts
    from harness.models.zoo import checkpoint_dir

    ids = list(fixed_length_prompts(AutoTokenizer.from_pretrained(checkpoint_dir(default_model_spec)), 32, 1)[0].ids)
    m = system.run_cold(prepared, Workload.for_request(ids, 2), device,
                        ProtocolConfig(repetitions=1, warmup_runs=0, busy_policy="flag"))
    rep = {x.name: x.value for x in m.repetitions[0]}
    # cold as the protocol defines it: other tests' processes may read the same exported file meanwhile
    assert rep["prompt_tokens"] == 32 and rep["tokens_match"] == 1.0
    assert rep["resident_before"] <= ProtocolConfig().max_resident_fraction
    assert 0 < rep["mnn_prefill_s"] < rep["ttft_s"] <= rep["exit_s"]
    assert m.workload.ctx == 256 and m.command[4] == "2"  # thread_num is the workload's


def test_an_export_larger_than_the_available_memory_is_not_run(tmp_path, monkeypatch):
    """Refused before llmexport starts (it would hold the whole model in FP32), with the sizes in the reason."""
    import harness.host
    import harness.systems.mnn_export as mnn_export
    from harness.models.zoo import ModelSpec
    from harness.systems.base import NotRun

    (tmp_path / "model.safetensors").write_bytes(b"\0" * 2_000_000)  # 1e6 FP16 parameters: ~3.6 MB to export
    monkeypatch.setattr(harness.host, "mem_available", lambda: 1_000_000)
    monkeypatch.setattr("harness.systems.mnn.checkpoint_dir", lambda spec: tmp_path)
    monkeypatch.setattr(mnn_export, "cache_dir", lambda *parts: tmp_path / "cache")
    with pytest.raises(NotRun, match=r"loads the whole model in FP32: about .* GB for .*B parameters .*this host has"):
        get_system({"name": "mnn"}).prepare(ModelSpec(name="big", source="hf", path=str(tmp_path)), 8,
                                            get_device({"name": "local"}))
    monkeypatch.setattr(harness.host, "mem_available", lambda: 10_000_000)
    mnn_export.check_memory(tmp_path)  # fits: no error
