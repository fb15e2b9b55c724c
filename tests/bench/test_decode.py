"""make bench-decode's bounds: the bytes one decode step reads, weights and KV cache, from the model's shape."""
import pytest

from harness.bench.decode import KV_BYTES, _ints, bytes_per_token, kv_bytes_per_token

SMOLLM2 = {"hidden_size": 576, "intermediate_size": 1536, "num_hidden_layers": 30, "num_attention_heads": 9,
           "num_key_value_heads": 3, "vocab_size": 49152}


def test_a_step_reads_every_linear_and_the_lm_head_once():
    per_layer = 576 * 576 * 2 + 576 * 192 * 2 + 576 * 1536 * 3  # q, o; k, v (3 heads of 64); gate, up, down
    assert bytes_per_token(SMOLLM2) == 30 * per_layer + 49152 * 576  # 134.5 MB


def test_the_kv_cache_read_grows_with_the_position_and_the_value_width():
    # 30 layers x (K and V) x 192 values x 1024 positions x 4 bytes: 47.2 MB, a third of the weights at 1024 tokens
    assert kv_bytes_per_token(SMOLLM2, 1024, KV_BYTES["edgeflow"]) == pytest.approx(30 * 2 * 192 * 1024 * 4)
    assert kv_bytes_per_token(SMOLLM2, 1024, KV_BYTES["llamacpp"]) * 2 == kv_bytes_per_token(SMOLLM2, 1024, 4)
    assert kv_bytes_per_token(SMOLLM2, 0, 4) == 0


def test_context_lengths_are_a_comma_separated_list():
    assert _ints("128,512,1024") == (128, 512, 1024)
    with pytest.raises(ValueError):
        _ints("128,many")
