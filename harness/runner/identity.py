"""A measurement's identity in the results store: its configuration and the numerics that compute it.

A configuration whose YAML did not change can still compute other numbers: the definition of what a quantized
linear computes (input widths, output grids, their rounding) and the defaults behind keys a YAML leaves out live in
code. Their digest is part of every configuration's hash, so after a numerics change a resumed sweep measures again
instead of saying "already measured" over rows of the old numerics (which stay in the store, under the old hash).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from functools import lru_cache
from pathlib import Path

from omegaconf import DictConfig

from harness.config import config_hash

ROOT = Path(__file__).resolve().parents[2]
# What defines a quantized linear's numbers: the Python definition and reference, the graphs HTP gets, and the
# runtime's own expressions of it (the C++ reference kernels, quantization, requantization, the loaded scales).
NUMERICS_SOURCES = (
    "harness/quant/numerics.py", "harness/quant/outputs.py", "harness/quant/fakequant.py", "harness/npu/graph.py",
    "edgeflow_runtime/src/engine/model.cpp", "edgeflow_runtime/src/engine/ops.cpp",
    "edgeflow_runtime/src/engine/gemm_ref.cpp", "edgeflow_runtime/src/engine/gemm16_ref.cpp",
    "edgeflow_runtime/src/engine/tensor_names.cpp",
)


@lru_cache(maxsize=1)
def numerics_digest() -> str:
    """sha256 over NUMERICS_SOURCES and the quantizer's defaults (keys a YAML may leave out)."""
    from harness.quant.config import QuantizerConfig

    h = hashlib.sha256()
    for rel in NUMERICS_SOURCES:
        h.update(rel.encode() + b"\0" + (ROOT / rel).read_bytes())
    h.update(json.dumps(dataclasses.asdict(QuantizerConfig()), sort_keys=True).encode())
    return h.hexdigest()


def measurement_hash(cfg: DictConfig) -> str:
    """The store's config_hash: the configuration's (harness.config.config_hash) with the numerics digest."""
    return hashlib.sha256(f"{config_hash(cfg)}\0{numerics_digest()}".encode()).hexdigest()[:16]
