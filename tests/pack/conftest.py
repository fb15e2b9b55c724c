"""Fixtures: tiny random Llama artifacts (random codes and per-channel bit-widths), packed in every layout."""
import pytest
from transformers import LlamaConfig

from harness.pack.synthetic import random_artifact


def tiny_config() -> dict:
    # intermediate 200 and hidden 72 are not multiples of 128: the last weightlet group of every channel is padded
    cfg = LlamaConfig(hidden_size=72, intermediate_size=200, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, head_dim=18, vocab_size=96, tie_word_embeddings=True)
    keys = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
            "head_dim", "vocab_size", "max_position_embeddings", "rms_norm_eps", "rope_theta", "tie_word_embeddings")
    out = {k: getattr(cfg, k, None) for k in keys}
    out["rope_theta"] = 10000.0
    return out


@pytest.fixture(scope="session")
def tiny_artifact():
    return random_artifact(tiny_config(), mean_bits=5, seed=1, name="tiny-llama", output_grids=True)
