"""Packers: write a quantized-model artifact as one packed model file (docs/format.md) and read it back.

    from harness.pack import pack_artifact, PackedFile
    pack_artifact(load_artifact("art/"), "model.efpk", layout="weightlet")
    f = PackedFile("model.efpk"); codes, bits = f.quant_codes("model.layers.0.mlp.up_proj")
"""
from harness.pack import baselines, weightlet  # noqa: F401  (register the layouts)
from harness.pack.base import LAYOUTS, Layout, PackError, get_layout
from harness.pack.container import PackedFile, pack_artifact

__all__ = ["LAYOUTS", "Layout", "PackError", "PackedFile", "get_layout", "pack_artifact"]
