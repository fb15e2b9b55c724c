"""Seed inputs for the native reader's fuzzer: small valid packed files in every layout, so mutations start from
well-formed headers, tables and payloads."""
from __future__ import annotations

from pathlib import Path

from harness.pack import LAYOUTS, pack_artifact
from harness.pack.synthetic import random_artifact

SEED_CONFIG = dict(hidden_size=40, intermediate_size=24, num_hidden_layers=1, num_attention_heads=2,
                   num_key_value_heads=1, head_dim=20, vocab_size=8, max_position_embeddings=64,
                   rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=True)


def write_corpus(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    artifact = random_artifact(SEED_CONFIG, mean_bits=4, seed=5, name="fuzz-seed")
    for name in LAYOUTS:
        pack_artifact(artifact, folder / f"seed-{name}.efpk", layout=name)
    return folder
