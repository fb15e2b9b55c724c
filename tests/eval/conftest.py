"""The data fixtures (stand-in corpus, tokenizer) plus a tiny random Llama sized to that tokenizer."""
import pytest
import torch

from tests.data.conftest import corpus, sdist, tokenizer  # noqa: F401  (fixtures shared with tests/data)


@pytest.fixture(scope="session")
def tiny_model(tokenizer):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    return LlamaForCausalLM(config).eval()
