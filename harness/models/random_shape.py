"""Paper-shaped models without a download: the published shape of a paper model (conf/model/shape-*.yaml
`architecture`) with seeded random weights, written once into the cache as FP16 safetensors, one shard per layer, with
the default model's tokenizer (its ids are a subset of the larger vocabularies; the extra embedding rows are unused).

Recipe (RECIPE, recorded in config.json and every row's notes), chosen so that a per-channel bit allocation is not
trivially uniform and smoothing has outliers to move, as in trained LLMs:
  linear weight [out, in] = N(0, 0.02) x a per-output-channel factor exp(N(0, 0.5))   (channel ranges differ ~5x)
                            x 8 on 1% of the input channels                            (outlier input channels)
  embedding / lm_head     = N(0, 0.02);   RMSNorm weights = 1
Generation streams one tensor at a time (peak memory: the largest tensor in FP32, the embedding), seeded per tensor
name so any shard can be regenerated alone. Their accuracy means nothing: accuracy, perplexity and fidelity rows are
"not run" for them; TTFT, memory and energy are measured.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

RECIPE = {"std": 0.02, "channel_log_std": 0.5, "outlier_fraction": 0.01, "outlier_gain": 8.0, "seed": 0}
RECIPE_TEXT = ("random weights: N(0, 0.02) x per-output-channel exp(N(0, 0.5)), x 8 on 1% of input channels, "
               "seed 0 (harness/models/random_shape.py)")


def _generator(name: str):
    import torch

    seed = int.from_bytes(hashlib.sha256(f"{RECIPE['seed']}:{name}".encode()).digest()[:8], "little")
    return torch.Generator().manual_seed(seed)


def random_tensor(name: str, shape: tuple[int, ...]):
    """The recipe's FP16 tensor for a parameter name (deterministic: seeded by the name)."""
    import torch

    g = _generator(name)
    if name.endswith("norm.weight"):
        return torch.ones(shape, dtype=torch.float16)
    w = torch.randn(shape, generator=g) * RECIPE["std"]
    if len(shape) == 2 and not name.endswith(("embed_tokens.weight", "lm_head.weight")):
        w *= torch.exp(torch.randn(shape[0], 1, generator=g) * RECIPE["channel_log_std"])
        outliers = torch.randperm(shape[1], generator=g)[: max(1, int(shape[1] * RECIPE["outlier_fraction"]))]
        w[:, outliers] *= RECIPE["outlier_gain"]
    return w.to(torch.float16)


def parameter_shapes(a: dict) -> dict[str, dict[str, tuple[int, ...]]]:
    """{shard name: {parameter: shape}} of a Llama-layout model with architecture `a` (harness/models/arch.py)."""
    h, i, d = a["hidden_size"], a["intermediate_size"], a["head_dim"]
    q, kv = a["num_attention_heads"] * d, a["num_key_value_heads"] * d
    shards = {"embed": {"model.embed_tokens.weight": (a["vocab_size"], h)}}
    for layer in range(a["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        shards[f"layer{layer:03d}"] = {
            p + "self_attn.q_proj.weight": (q, h), p + "self_attn.k_proj.weight": (kv, h),
            p + "self_attn.v_proj.weight": (kv, h), p + "self_attn.o_proj.weight": (h, q),
            p + "mlp.gate_proj.weight": (i, h), p + "mlp.up_proj.weight": (i, h), p + "mlp.down_proj.weight": (h, i),
            p + "input_layernorm.weight": (h,), p + "post_attention_layernorm.weight": (h,)}
    shards["head"] = {"model.norm.weight": (h,), **({} if a["tie_word_embeddings"] else
                                                     {"lm_head.weight": (a["vocab_size"], h)})}
    return shards


def write_checkpoint(architecture: dict, out: Path, tokenizer_dir: Path, progress=None) -> None:
    """config.json, one safetensors shard per layer + index, and the tokenizer files of `tokenizer_dir`."""
    from safetensors.torch import save_file
    from transformers import AutoTokenizer, LlamaConfig

    shards = parameter_shapes(architecture)
    weight_map = {}
    for n, (shard, params) in enumerate(shards.items()):
        filename = f"model-{shard}.safetensors"
        save_file({name: random_tensor(name, shape) for name, shape in params.items()}, out / filename,
                  metadata={"format": "pt"})
        weight_map |= {name: filename for name in params}
        if progress:
            progress(n + 1, len(shards))
    (out / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}, indent=1))
    config = LlamaConfig(**architecture, torch_dtype="float16", architectures=["LlamaForCausalLM"])
    config_dict = {**config.to_dict(), "edgeflow_random_weights": RECIPE}
    (out / "config.json").write_text(json.dumps(config_dict, indent=1))
    AutoTokenizer.from_pretrained(tokenizer_dir).save_pretrained(out)
