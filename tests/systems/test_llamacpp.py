import pytest

from harness.devices import get_device
from harness.measure.cold import EngineError, ProtocolConfig
from harness.systems import get_system
from harness.systems.base import Prepared
from harness.systems.llamacpp import perf_metrics

# Captured from llama-completion of llama-cpp-python 0.3.36's llama.cpp.
STDERR = b"""0.06.620.736 I common_perf_print:    samplers time =       0.04 ms /     6 tokens
0.06.620.751 I common_perf_print:        load time =     859.12 ms
0.06.620.774 I common_perf_print: prompt eval time =     858.78 ms /   128 tokens (    6.71 ms per token,   149.05 tokens per second)
0.06.620.791 I common_perf_print:        eval time =       0.00 ms /     1 runs   (    0.00 ms per token,      inf tokens per second)
"""


def test_perf_lines_are_parsed():
    m = {x.name: x.value for x in perf_metrics(STDERR)}
    assert m == {"llamacpp_load_s": pytest.approx(0.85912), "llamacpp_prompt_eval_s": pytest.approx(0.85878),
                 "prompt_tokens": 128}
    with pytest.raises(EngineError, match="no perf lines") as err:
        perf_metrics(b"GGML_ASSERT(n_tokens > 0) failed\n")
    assert "GGML_ASSERT" in err.value.stderr_tail


def test_command_is_the_documented_cold_invocation():
    system = get_system({"name": "llamacpp", "threads": 2})
    prepared = Prepared("llamacpp", ["m.gguf"], {"llama-completion": "/b/llama-completion", "gguf": "m.gguf"}, "gguf Q8_0")
    assert system.command(prepared, "p.txt") == [
        "/b/llama-completion", "-m", "m.gguf", "-f", "p.txt", "-n", "1", "--no-warmup", "-no-cnv",
        "--no-display-prompt", "-fit", "off", "--no-escape", "--ignore-eos", "-t", "2"]
    assert system.gguf_type(8) == "Q8_0" and system.gguf_type(4) == "Q4_0"
    with pytest.raises(ValueError, match="bits=5"):
        system.gguf_type(5)


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
    m = system.run_cold(prepared, ids, device, ProtocolConfig(repetitions=1, warmup_runs=0, busy_policy="flag"))
    rep = {x.name: x for x in m.repetitions[0]}
    assert rep["prompt_tokens"].value == 32
    assert rep["resident_before"].value == 0.0
    assert 0 < rep["ttft_s"].value <= rep["exit_s"].value
    assert rep["peak_rss_mb"].value > 100  # the Q8_0 model alone is ~145 MB, mapped and touched


@pytest.mark.real_model
def test_throughput_and_perplexity_of_the_default_model(default_model_spec, tmp_path):
    """llama-bench JSON is parsed; Q8_0 perplexity stays within 2% of the F16 GGUF's on the same text."""
    from pathlib import Path

    from harness.data.corpus import load_corpus
    from harness.systems.llamacpp import bench_throughput, perplexity

    device = get_device({"name": "local"})
    prepared = get_system({"name": "llamacpp"}).prepare(default_model_spec, 8, device)
    rates = {m.name: m.value for m in bench_throughput(prepared, 16, 2, 2, 300, repetitions=1)}
    assert rates["llamacpp_pp_tokens_per_s"] > 0 and rates["llamacpp_tg_tokens_per_s"] > 0
    text = tmp_path / "docs.txt"
    text.write_text(load_corpus().split_text("perplexity"))  # the harness's perplexity text
    f16 = str(Path(prepared.artifacts["gguf"]).with_name("f16.gguf"))
    ppl = {g: perplexity(prepared.artifacts["llama-perplexity"], g, str(text), 128, 2, 300, chunks=3)
           for g in (f16, prepared.artifacts["gguf"])}
    assert 1 < ppl[f16] < 200
    assert abs(ppl[prepared.artifacts["gguf"]] / ppl[f16] - 1) < 0.02, ppl
