"""The `npu` config group (conf/npu/*.yaml): the Qualcomm SoC whose HTP the accelerator half is compiled for.

`soc_model` is QNN's SoC id, passed to the HTP backend on every session: without it QNN compiles for HTP v68, whose
numerics are visibly worse than the phones' (measured). `activation_bits` is the width of the activations the
graphs take and give (8: uint8, 16: uint16; weights are INT8 either way). `chunk_tokens` is the token batch a
compiled graph runs, the runtime's prefill chunk. `qairt_root` is the user's Qualcomm QAIRT SDK, which running the
compiled layers on a phone's NPU needs (phone.py).

An NPU matmul's output is requantized before the CPU sees it, on a static grid: the artifact's own (quantizer keys
`output_grid`, `output_headroom`; harness/quant/outputs.py), which the graphs, the fake-quant reference and the
runtime all use.
"""
from __future__ import annotations

from dataclasses import dataclass

from harness.config import build, require

DEFAULT = "sm8750"


@dataclass(frozen=True)
class NpuConfig:
    name: str
    soc_model: int  # QNN's SoC id: 69 SM8750, 57 SM8650, 43 SM8550
    htp_arch: str  # the Hexagon tensor processor generation, "v79"
    chipset: str  # the marketing name, for tables
    activation_bits: int = 8
    chunk_tokens: int = 128
    qairt_root: str | None = None  # the user's QAIRT SDK on this host, for runs on a phone (harness/npu/phone.py)
    quantizer_recipe: bool = True  # the quantizer's settings for these numerics (harness/npu/recipe.py); false: the paper's

    def __post_init__(self):
        require(isinstance(self.soc_model, int) and self.soc_model > 0, "npu.soc_model",
                f"must be QNN's positive SoC id (69 = SM8750), got {self.soc_model!r}")
        require(isinstance(self.htp_arch, str) and self.htp_arch.startswith("v") and self.htp_arch[1:].isdigit(),
                "npu.htp_arch", f"must look like 'v79', got {self.htp_arch!r}")
        require(self.activation_bits in (8, 16), "npu.activation_bits",
                f"must be 8 or 16 (HTP's uint8/uint16 activations), got {self.activation_bits!r}")
        require(isinstance(self.chunk_tokens, int) and 1 <= self.chunk_tokens <= 4096, "npu.chunk_tokens",
                f"must be an integer in 1..4096, got {self.chunk_tokens!r}")
        require(self.qairt_root is None or isinstance(self.qairt_root, str), "npu.qairt_root",
                f"must be null or the QAIRT SDK's folder, got {self.qairt_root!r}")
        require(isinstance(self.quantizer_recipe, bool), "npu.quantizer_recipe",
                f"must be true or false, got {self.quantizer_recipe!r}")


def load_npu_config(name: str = DEFAULT) -> NpuConfig:
    """conf/npu/<name>.yaml as a validated NpuConfig (what `npu=<name>` selects)."""
    from omegaconf import OmegaConf

    from harness.registry import conf_group

    folder = conf_group("npu")
    path = folder / f"{name}.yaml"
    if not path.is_file():
        raise ValueError(f"no npu config {name!r}; choose one of {sorted(p.stem for p in folder.glob('*.yaml'))}")
    return build(NpuConfig, OmegaConf.load(path), "npu")


def npu_of(cfg) -> NpuConfig:
    """The run's npu group, or the default SoC's when the run selects none."""
    node = cfg.get("npu")
    return load_npu_config() if node is None else build(NpuConfig, node, "npu")
