"""Quantized-model artifacts with random codes, for tests and for the packing benchmarks before a real quantizer run.

The unpack cost depends only on shapes and the per-channel bit-widths, not on the code values, so a random artifact
with the bit mix of the paper's Figure 4a (most channels at the budget, some one bit below or above) measures what a
quantized model would.
"""
from __future__ import annotations

import numpy as np
import torch

from harness.artifact import Artifact, QuantLinear

LINEAR_SHAPES = {  # module suffix -> (output channels, input features) as functions of the config
    "self_attn.q_proj": lambda c: (c["num_attention_heads"] * c["head_dim"], c["hidden_size"]),
    "self_attn.k_proj": lambda c: (c["num_key_value_heads"] * c["head_dim"], c["hidden_size"]),
    "self_attn.v_proj": lambda c: (c["num_key_value_heads"] * c["head_dim"], c["hidden_size"]),
    "self_attn.o_proj": lambda c: (c["hidden_size"], c["num_attention_heads"] * c["head_dim"]),
    "mlp.gate_proj": lambda c: (c["intermediate_size"], c["hidden_size"]),
    "mlp.up_proj": lambda c: (c["intermediate_size"], c["hidden_size"]),
    "mlp.down_proj": lambda c: (c["hidden_size"], c["intermediate_size"]),
}


def bit_mix(channels: int, mean_bits: int, rng: np.random.Generator, spread: float = 0.12) -> np.ndarray:
    """uint8 [C]: `spread` of the channels one bit below the mean, as many one above, the rest at the mean (clipped
    to 1..8), shuffled. The mean is exact unless clipping or rounding shifts it."""
    bits = np.full(channels, mean_bits, np.int64)
    k = int(round(channels * spread))
    if 1 < mean_bits < 8:
        bits[:k] -= 1
        bits[k : 2 * k] += 1
    return rng.permutation(bits).astype(np.uint8)


def random_codes(bits: np.ndarray, dim: int, rng: np.random.Generator) -> np.ndarray:
    """int8 [C, D]: uniform codes q in each channel's full range [-2^(b-1), 2^(b-1) - 1]."""
    levels = (1 << bits.astype(np.int64))[:, None]
    return (rng.integers(0, 1 << 16, (len(bits), dim)) % levels - levels // 2).astype(np.int8)


def random_artifact(config: dict, mean_bits: int, seed: int = 0, name: str = "random",
                    output_grids: bool = False, act_bits: int = 8, lm_head_bits: int | None = None) -> Artifact:
    """Every linear of every layer quantized with random codes and the bit mix above; INT8 embeddings. output_grids:
    each linear also gets a random static output grid (P.out_step, docs/quantized-artifact.md), which act_bits 16
    (A16 activations) needs. lm_head_bits: the LM head is its own table with the bit mix around this width (below 8:
    inside the bit budget, packed as a quantized weight) and the config untied; None: the config's tying as given."""
    if act_bits == 16 and not output_grids:
        raise ValueError("A16 linears need output grids (their sums do not fit int32)")
    rng = np.random.default_rng(seed)
    linears: dict[str, QuantLinear] = {}
    others: dict[str, torch.Tensor] = {}
    h, v = config["hidden_size"], config["vocab_size"]
    for i in range(config["num_hidden_layers"]):
        for suffix, shape_of in LINEAR_SHAPES.items():
            c, d = shape_of(config)
            bits = bit_mix(c, mean_bits, rng)
            linears[f"model.layers.{i}.{suffix}"] = QuantLinear(
                codes=torch.from_numpy(random_codes(bits, d, rng)),
                bits=torch.from_numpy(bits),
                w_scale=torch.from_numpy(rng.uniform(1e-3, 1e-2, c).astype(np.float32)),
                in_scale=torch.ones(d),
                act_scale=torch.tensor(0.05 * 127 / (127 if act_bits == 8 else 32767)),
                act_bits=act_bits,
                out_step=torch.from_numpy(rng.uniform(1e-3, 1e-2, c).astype(np.float32)) if output_grids else None,
            )
        for norm in ("input_layernorm", "post_attention_layernorm"):
            others[f"model.layers.{i}.{norm}.weight"] = torch.from_numpy(rng.uniform(0.5, 1.5, h).astype(np.float32))
    others["model.norm.weight"] = torch.ones(h)
    emb_bits = np.full(v, 8, np.uint8)
    others["model.embed_tokens.codes"] = torch.from_numpy(random_codes(emb_bits, h, rng))
    others["model.embed_tokens.w_scale"] = torch.from_numpy(rng.uniform(1e-3, 1e-2, v).astype(np.float32))
    others["model.embed_tokens.bits"] = torch.from_numpy(emb_bits)
    if lm_head_bits is not None:
        head_bits = bit_mix(v, lm_head_bits, rng)
        others["lm_head.codes"] = torch.from_numpy(random_codes(head_bits, h, rng))
        others["lm_head.w_scale"] = torch.from_numpy(rng.uniform(1e-3, 1e-2, v).astype(np.float32))
        others["lm_head.bits"] = torch.from_numpy(head_bits)
        config = {**config, "tie_word_embeddings": False}
    manifest = {"model": {"name": name, "config": dict(config)},
                "quantizer": {"name": "random", "params": {"mean_bits": mean_bits, "seed": seed}},
                "runtime_compatible": True}
    return Artifact(manifest=manifest, linears=linears, others=others)
