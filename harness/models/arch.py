"""The Llama architecture facts the quantizer, the packer and the runtime share: one field table, from which follow
the runtime config dict of an artifact (docs/quantized-artifact.md), the packed file's config block (docs/format.md)
and the engine's C struct `ef_config` (include/edgeflow/engine.h; tests/runtime/test_config_layout.py checks that the
C and Python layouts agree).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Field:
    name: str  # the Hugging Face LlamaConfig attribute
    kind: type  # int, float or bool (bool: int32 0/1 in C)
    default: object  # used when a checkpoint's config leaves the field out (None: required)
    doc: str


FIELDS = (  # the order of ef_config; the packed file's config block stores the first 8 in this order too
    Field("hidden_size", int, None, "H: width of the residual stream"),
    Field("intermediate_size", int, None, "I: width of the MLP (gate/up [I, H], down [H, I])"),
    Field("num_hidden_layers", int, None, "L: decoder layers"),
    Field("num_attention_heads", int, None, "query heads (q_proj [heads * head_dim, H])"),
    Field("num_key_value_heads", int, None, "key/value heads, grouped-query attention (k/v_proj [kv * head_dim, H])"),
    Field("head_dim", int, None, "d: width of one head (default H / heads)"),
    Field("vocab_size", int, None, "V: embedding [V, H] and lm_head [V, H] rows"),
    Field("max_position_embeddings", int, 2048, "longest context the model was trained for"),
    Field("tie_word_embeddings", bool, False, "lm_head shares the embedding matrix"),
    Field("rms_norm_eps", float, 1e-6, "epsilon of every RMSNorm"),
    Field("rope_theta", float, 10000.0, "RoPE base frequency"),
)
NAMES = tuple(f.name for f in FIELDS)
PACKED_INT_FIELDS = NAMES[:8]  # docs/format.md "Config": 8 x u32, then eps and theta f32, then flags (bit 0: tied)


def runtime_config(config) -> dict:
    """{field: value} for every FIELDS entry, from a Hugging Face LlamaConfig (or anything with those attributes)."""
    rope = getattr(config, "rope_parameters", None) or {}
    out = {}
    for f in FIELDS:
        value = getattr(config, f.name, None)
        if f.name == "head_dim":
            value = value or config.hidden_size // config.num_attention_heads
        elif f.name == "rope_theta":
            value = rope.get("rope_theta", value)  # transformers 5 keeps it in rope_parameters
        out[f.name] = f.kind(f.default if value is None else value)
    return out


def complete(config: dict, where: str = "model config") -> dict:
    """`config` with defaults filled in and types checked; a missing required field or an unknown one is an error
    naming it."""
    unknown = sorted(set(config) - set(NAMES))
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {unknown}; the fields are {list(NAMES)}")
    out = {}
    for f in FIELDS:
        value = config.get(f.name, f.default)
        if value is None and f.name == "head_dim" and "hidden_size" in config and "num_attention_heads" in config:
            value = config["hidden_size"] // config["num_attention_heads"]
        if value is None:
            raise ValueError(f"{where}: {f.name} is missing ({f.doc})")
        out[f.name] = f.kind(value)
    return out


def linear_params(config: dict) -> int:
    """Weights of the quantized linears (q, k, v, o, gate, up, down of every layer); prefill does 2 ops per weight
    per token on them."""
    h, i = config["hidden_size"], config["intermediate_size"]
    q = config["num_attention_heads"] * config["head_dim"]
    kv = config["num_key_value_heads"] * config["head_dim"]
    return config["num_hidden_layers"] * (h * q + 2 * h * kv + q * h + 3 * h * i)
