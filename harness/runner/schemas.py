"""Which schema validates which config group. A plugin area adds its group here; `validate_groups` checks every
group present in the composed config before any work starts."""
from __future__ import annotations

from typing import Callable

from omegaconf import DictConfig, OmegaConf

from harness.config import ConfigError, build


def _quantizer(node):
    from harness.quant.base import quantizer_config

    try:
        return quantizer_config(OmegaConf.to_container(node, resolve=True))
    except (TypeError, ValueError) as e:
        raise ConfigError(f"quantizer: {e}") from None


def _packing(node):
    from harness.pack import LAYOUTS

    if node.get("layout") not in LAYOUTS:
        raise ConfigError(f"packing: packing.layout must be one of {sorted(LAYOUTS)}, got {node.get('layout')!r}")
    return node


def _validators() -> dict[str, Callable]:
    # Imported lazily: each area's schema lives beside its code.
    from harness.data.config import DatasetConfig
    from harness.devices import DEVICES
    from harness.measure.cold import ProtocolConfig
    from harness.npu.config import NpuConfig
    from harness.systems import SYSTEMS
    from harness.systems.edgeflow import PipelineConfig

    schemas = {"protocol": ProtocolConfig, "dataset": DatasetConfig,
               "pipeline": PipelineConfig, "npu": NpuConfig}
    validators = {group: (lambda node, g=group, s=schema: build(s, node, g)) for group, schema in schemas.items()}
    return {**validators, "system": SYSTEMS.config, "device": DEVICES.config, "quantizer": _quantizer, "packing": _packing}


def validate_groups(cfg: DictConfig) -> dict[str, object]:
    return {group: check(cfg[group]) for group, check in _validators().items() if cfg.get(group) is not None}
