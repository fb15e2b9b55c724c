import pytest

from harness.devices import get_device
from harness.measure.cold import EngineError, ProtocolConfig
from harness.systems import get_system
from harness.systems.base import Prepared
from harness.measure.workload import Workload
from harness.systems.llamacpp import check_engine_settings, engine_settings, perf_metrics, prompt_file_text

# Captured from llama-completion of llama-cpp-python 0.3.36's llama.cpp.
STDERR = b"""0.06.620.736 I common_perf_print:    samplers time =       0.04 ms /     6 tokens
0.06.620.751 I common_perf_print:        load time =     859.12 ms
0.06.620.774 I common_perf_print: prompt eval time =     858.78 ms /   128 tokens (    6.71 ms per token,   149.05 tokens per second)
0.06.620.791 I common_perf_print:        eval time =       0.00 ms /     1 runs   (    0.00 ms per token,      inf tokens per second)
"""
SYSTEM_INFO = b"""0.00.112.559 I system_info: n_threads = 2 (n_threads_batch = 2) / 2 | CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | AVX512 = 1 | AVX512_VBMI = 1 | AVX512_VNNI = 1 | AVX512_BF16 = 1 | LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 |
0.00.112.782 I generate: n_ctx = 256, n_batch = 2048, n_predict = 1, n_keep = 0
"""


def test_perf_lines_are_parsed():
    m = {x.name: x.value for x in perf_metrics(STDERR)}
    assert m == {"llamacpp_load_s": pytest.approx(0.85912), "llamacpp_prompt_eval_s": pytest.approx(0.85878),
                 "prompt_tokens": 128}
    with pytest.raises(EngineError, match="no perf lines") as err:
        perf_metrics(b"GGML_ASSERT(n_tokens > 0) failed\n")
    assert "GGML_ASSERT" in err.value.stderr_tail


def test_command_takes_ctx_threads_and_batch_from_the_workload():
    system = get_system({"name": "llamacpp", "threads": 2})
    prepared = Prepared("llamacpp", ["m.gguf"], {"llama-completion": "/b/llama-completion", "gguf": "m.gguf",
                                                 "kernel_path": "extra-buffers"}, "gguf Q8_0")
    work = Workload.for_request(range(1, 129), 2)
    assert system.command(prepared, "p.txt", work) == [
        "/b/llama-completion", "-m", "m.gguf", "-f", "p.txt", "-n", "1", "--no-warmup", "-no-cnv",
        "--no-display-prompt", "-fit", "off", "--no-escape", "--ignore-eos", "-c", "256", "-b", "2048", "-ub", "512",
        "-t", "2", "-tb", "2"]
    long = system.command(prepared, "p.txt", Workload.for_request(range(1, 961), 2))  # one pass for 960 tokens
    assert long[long.index("-c") + 1] == "1024" and long[long.index("-ub") + 1] == "960"
    assert system.gguf_type(8) == "Q8_0" and system.gguf_type(4) == "Q4_0"
    with pytest.raises(ValueError, match="bits=5"):
        system.gguf_type(5)
    prepared.artifacts["kernel_path"] = "no-repack"  # the probe found the extra buffer types crash on this host
    assert system.command(prepared, "p.txt", work)[-1] == "--no-repack"
    prepared.artifacts.pop("kernel_path")
    with pytest.raises(ValueError, match="kernel path"):
        system.command(prepared, "p.txt", work)


def test_workloads_llamacpp_cannot_honour_are_refused():
    system = get_system({"name": "llamacpp", "threads": 2})
    with pytest.raises(ValueError, match="ctx=300"):  # llama.cpp would pad it to 512
        system.check_workload(Workload(tuple(range(1, 129)), 300, 2))
    with pytest.raises(ValueError, match="ctx=256"):  # no room for the 4 spare positions llama-completion keeps
        system.check_workload(Workload(tuple(range(1, 254)), 256, 2))
    with pytest.raises(ValueError, match="thread budget"):
        system.check_workload(Workload.for_request(range(1, 129), 4))
    with pytest.raises(ValueError, match="first generated token"):
        system.check_workload(Workload.for_request(range(1, 129), 2, timed_event="exit"))


def test_engine_settings_are_read_and_checked():
    e = engine_settings(SYSTEM_INFO)
    assert e["threads"] == 2 and e["threads_batch"] == 2 and e["ctx"] == 256 and e["n_batch"] == 2048
    assert "AVX512_VNNI" in e["isa"].split() and "AVX2" in e["isa"].split() and "REPACK" not in e["isa"]
    check_engine_settings(e, Workload.for_request(range(1, 129), 2))
    with pytest.raises(EngineError, match="ctx=256, the workload asked for 512"):
        check_engine_settings(e, Workload.for_request(range(1, 129), 2, ctx=512))
    with pytest.raises(EngineError, match="threads=2, the workload asked for 1"):
        check_engine_settings(e, Workload.for_request(range(1, 129), 1))
    with pytest.raises(EngineError, match="no system_info"):
        engine_settings(b"llama_model_load: error\n")


def test_prompt_file_keeps_a_trailing_newline():
    # llama-completion's -f drops one trailing newline; the token it encodes must survive
    assert prompt_file_text("a b\n") == "a b\n\n" and prompt_file_text("a b") == "a b"


@pytest.mark.real_model
def test_cold_run_of_the_default_model(default_model_spec):
    """Builds llama.cpp once (cached, ~8 min on 2 cores) and converts the default model to Q8_0."""
    from transformers import AutoTokenizer

    from harness.data.prompts import fixed_length_prompts
    from harness.models.zoo import checkpoint_dir

    device = get_device({"name": "local"})
    system = get_system({"name": "llamacpp", "threads": 2})
    prepared = system.prepare(default_model_spec, 8, device)
    ids = list(fixed_length_prompts(AutoTokenizer.from_pretrained(checkpoint_dir(default_model_spec)), 32, 1)[0].ids)
    m = system.run_cold(prepared, Workload.for_request(ids, 2), device,
                        ProtocolConfig(repetitions=1, warmup_runs=0, busy_policy="flag"))
    rep = {x.name: x for x in m.repetitions[0]}
    assert rep["tokens_match"].value == 1.0 and m.engine["ctx"] == 256 and m.engine["threads_batch"] == 2
    assert m.command[m.command.index("-c") + 1] == "256" and m.engine["isa"]
    # the probed kernel path is in the engine report and every row's notes, with the buffers in llama.cpp's words
    assert m.engine["kernel_path"] == prepared.artifacts["kernel_path"]
    assert prepared.notes[0].startswith("llama.cpp kernel path: ") and "probe ran (weights in CPU" in prepared.notes[0]
    assert rep["prompt_tokens"].value == 32
    assert rep["resident_before"].value <= ProtocolConfig().max_resident_fraction  # other tests may read the GGUF
    assert 0 < rep["ttft_s"].value <= rep["exit_s"].value
    assert rep["peak_rss_mb"].value > 100  # the Q8_0 model alone is ~145 MB, mapped and touched
