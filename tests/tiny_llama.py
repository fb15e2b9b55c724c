"""A tiny random Llama (GQA, untied embeddings by default) for quantizer and evaluation tests."""
import torch
from transformers import LlamaConfig, LlamaForCausalLM


def tiny_llama(hidden=64, intermediate=128, layers=2, heads=4, kv_heads=2, vocab=256, tie=False, seed=0):
    torch.manual_seed(seed)
    config = LlamaConfig(hidden_size=hidden, intermediate_size=intermediate, num_hidden_layers=layers,
                         num_attention_heads=heads, num_key_value_heads=kv_heads, vocab_size=vocab,
                         max_position_embeddings=512, tie_word_embeddings=tie)
    model = LlamaForCausalLM(config).float().eval()
    with torch.no_grad():  # a few large input channels, as real LLM activations have, so smoothing matters
        for layer in model.model.layers:
            layer.input_layernorm.weight[:3] = 8.0
    return model
