"""EdgeFlow's calibration, quantization and packing stay under the streaming bound (harness/bench/scale.py:
2 x the largest decoder layer in FP32 + the calibration activations, above the process's baseline) on a miniature
4-layer model whose whole FP32 size is several times that bound, each step in a fresh process as `make bench-scale`
runs it; and the bound is computed from the shape as documented."""
import json

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from harness.bench.scale import EDGEFLOW_STEPS, measure, quantizer_params, shape_bound

pytestmark = pytest.mark.slow


def test_the_bound_follows_the_shape():
    config = {"hidden_size": 2048, "intermediate_size": 5504, "num_attention_heads": 16, "num_key_value_heads": 16,
              "num_hidden_layers": 24, "vocab_size": 151936, "tie_word_embeddings": False}
    b = shape_bound(config, calibration_tokens=4096)
    layer = 4 * 2048 * 2048 + 3 * 2048 * 5504 + 2 * 2048  # Qwen1.5-1.8B's decoder layer (no q/k/v biases)
    assert b["layer_fp32"] == 4 * layer and b["activations"] == 4 * 4096 * 2048
    assert b["bound"] == 2 * 4 * layer + 4 * 4096 * 2048
    assert b["params"] == 24 * layer + 2 * 151936 * 2048 + 2048  # ~1.84e9, as published
    # + the larger of one layer's Gram sums in FP64 and FP32 (one per input: q/k/v, o, gate/up, down) with the widest
    # one's FP32 product, and GPTQ's 3 x [5504, 5504] FP64 (the larger at this shape)
    with_gptq = shape_bound(config, calibration_tokens=4096, gram=True)
    grams = 12 * (3 * 2048 ** 2 + 5504 ** 2) + 4 * 5504 ** 2
    assert with_gptq["bound"] - b["bound"] == with_gptq["gram"] == 3 * 8 * 5504 ** 2 > grams
    narrow = shape_bound({**config, "intermediate_size": 2048}, calibration_tokens=4096, gram=True)
    assert narrow["gram"] == 12 * 4 * 2048 ** 2 + 4 * 2048 ** 2  # the Gram sums the larger


@pytest.mark.parametrize("npu", [None, "sm8750"])  # the paper's recipe; the NPU's (GPTQ: Gram matrices, A16 search)
def test_streaming_steps_stay_under_the_bound(tmp_path, monkeypatch, npu):
    monkeypatch.setenv("OMP_NUM_THREADS", "2")  # the steps' processes: per-thread scratch as on this 2-core host
    # with GPTQ the bound holds a layer's Gram matrices: narrower MLPs and more layers keep the model twice the bound.
    # With the NPU's recipe only calibration runs here (its quantization, GPTQ and the A16 search, is minutes on this
    # model; `make bench-scale NPU=sm8750` runs it at paper size: docs/paper-size.md)
    hidden, wide, layers = (1536, 4096, 4) if npu is None else (1536, 1536, 10)
    config = LlamaConfig(hidden_size=hidden, intermediate_size=wide, num_hidden_layers=layers, num_attention_heads=12,
                         num_key_value_heads=12, vocab_size=8192, tie_word_embeddings=False)
    torch.manual_seed(0)
    checkpoint = tmp_path / "ckpt"
    LlamaForCausalLM(config).half().save_pretrained(checkpoint)
    shape = json.loads((checkpoint / "config.json").read_text())
    bound = shape_bound(shape, 4096, gram=npu is not None)
    assert bound["model_fp32"] > 2 * bound["bound"]  # loading the model would break it
    for step in EDGEFLOW_STEPS if npu is None else ("calibrate",):
        r = measure(step, checkpoint, tmp_path / "scratch", random_calibration=True, timeout_s=600, npu=npu)
        print(f"{step}: {r['above_baseline_bytes'] / 1e6:.0f} MB above baseline, bound {r['bound'] / 1e6:.0f} MB")
        assert r["within_bound"], (step, r)
    if npu is None:
        assert (tmp_path / "scratch" / "model.efpk").stat().st_size > 0
    else:  # the recipe's GPTQ rounding needs every linear's Gram matrix: calibration wrote them
        from harness.quant.stream import StatsFile
        from harness.safetensors_io import SafetensorsReader

        assert quantizer_params(npu)["weight_rounding"] == "gptq"
        stats = StatsFile(tmp_path / "scratch" / "stats.safetensors")
        assert all(stats[name].gram.shape == (1536, 1536) for name in stats)
        stored = SafetensorsReader(stats.path).names()
        assert sum(n.endswith(".gram") for n in stored) == 4 * layers  # one per input: q/k/v, o, gate/up, down
