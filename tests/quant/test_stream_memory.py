"""EdgeFlow's calibration, quantization and packing stay under the streaming bound (harness/bench/scale.py:
2 x the largest decoder layer in FP32 + the calibration activations, above the process's baseline) on a miniature
4-layer model whose whole FP32 size is several times that bound, each step in a fresh process as `make bench-scale`
runs it; and the bound is computed from the shape as documented."""
import json

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from harness.bench.scale import EDGEFLOW_STEPS, measure, shape_bound

pytestmark = pytest.mark.slow


def test_the_bound_follows_the_shape():
    config = {"hidden_size": 2048, "intermediate_size": 5504, "num_attention_heads": 16, "num_key_value_heads": 16,
              "num_hidden_layers": 24, "vocab_size": 151936, "tie_word_embeddings": False}
    b = shape_bound(config, calibration_tokens=4096)
    layer = 4 * 2048 * 2048 + 3 * 2048 * 5504 + 2 * 2048  # Qwen1.5-1.8B's decoder layer (no q/k/v biases)
    assert b["layer_fp32"] == 4 * layer and b["activations"] == 4 * 4096 * 2048
    assert b["bound"] == 2 * 4 * layer + 4 * 4096 * 2048
    assert b["params"] == 24 * layer + 2 * 151936 * 2048 + 2048  # ~1.84e9, as published


def test_streaming_steps_stay_under_the_bound(tmp_path, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "2")  # the steps' processes: per-thread scratch as on this 2-core host
    config = LlamaConfig(hidden_size=1536, intermediate_size=4096, num_hidden_layers=4, num_attention_heads=12,
                         num_key_value_heads=12, vocab_size=8192, tie_word_embeddings=False)
    torch.manual_seed(0)
    checkpoint = tmp_path / "ckpt"
    LlamaForCausalLM(config).half().save_pretrained(checkpoint)
    shape = json.loads((checkpoint / "config.json").read_text())
    bound = shape_bound(shape, 4096)
    assert bound["model_fp32"] > 2 * bound["bound"]  # loading the model would break it
    for step in EDGEFLOW_STEPS:
        r = measure(step, checkpoint, tmp_path / "scratch", random_calibration=True, timeout_s=600)
        print(f"{step}: {r['above_baseline_bytes'] / 1e6:.0f} MB above baseline, bound {r['bound'] / 1e6:.0f} MB")
        assert r["within_bound"], (step, r)
    assert (tmp_path / "scratch" / "model.efpk").stat().st_size > 0
