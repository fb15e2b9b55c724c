"""Packers: write a quantized-model artifact as one packed model file (docs/format.md) and read it back.

    from harness.pack import pack_artifact, PackedFile
    pack_artifact(load_artifact("art/"), "model.efpk", layout="weightlet")
    f = PackedFile("model.efpk"); codes, bits = f.quant_codes("model.layers.0.mlp.up_proj")
"""
from dataclasses import dataclass

from harness.pack.base import Layout, PackError
from harness.pack.baselines import Int8Layout, KQuantLayout, Mixed48Layout
from harness.pack.weightlet import WeightletLayout

LAYOUTS: dict[str, Layout] = {cls.name: cls() for cls in (WeightletLayout, Int8Layout, Mixed48Layout, KQuantLayout)}
LAYOUT_BY_DTYPE: dict[int, Layout] = {layout.dtype: layout for layout in LAYOUTS.values()}


def get_layout(name: str) -> Layout:
    if name not in LAYOUTS:
        raise PackError(f"unknown packing layout {name!r}; choose one of {sorted(LAYOUTS)}")
    return LAYOUTS[name]


@dataclass
class PackingSpec:
    """The `packing` config group (conf/packing/*.yaml)."""

    layout: str = "weightlet"

    def __post_init__(self):
        if self.layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {sorted(LAYOUTS)}, got {self.layout!r}")


from harness.pack.container import PackedFile, pack_artifact  # noqa: E402  (needs LAYOUTS)

__all__ = ["LAYOUTS", "Layout", "PackError", "PackedFile", "PackingSpec", "get_layout", "pack_artifact"]
