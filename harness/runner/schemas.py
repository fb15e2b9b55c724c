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


def _fixed_schemas() -> dict[str, type]:
    """The groups whose every option has one schema. Imported lazily: each area's schema lives beside its code."""
    from harness.data.config import DatasetConfig
    from harness.measure.cold import ProtocolConfig
    from harness.npu.config import NpuConfig
    from harness.systems.edgeflow import PipelineConfig

    return {"protocol": ProtocolConfig, "dataset": DatasetConfig, "pipeline": PipelineConfig, "npu": NpuConfig}


def _validators() -> dict[str, Callable]:
    from harness.devices import DEVICES
    from harness.systems import SYSTEMS

    validators = {group: (lambda node, g=group, s=schema: build(s, node, g))
                  for group, schema in _fixed_schemas().items()}
    return {**validators, "system": SYSTEMS.config, "device": DEVICES.config, "quantizer": _quantizer,
            "packing": _packing}


def schema_of(group: str, node) -> type | None:
    """The dataclass whose fields are the keys an option of `group` accepts (its YAML `node` spells out some of them),
    by the implementation it names for plugin groups; None for a group without one (packing, model, experiment)."""
    from harness.devices import DEVICES
    from harness.quant.base import REGISTRY as QUANTIZERS
    from harness.systems import SYSTEMS

    fixed = _fixed_schemas().get(group)
    if fixed is not None:
        return fixed
    registry = {"system": SYSTEMS, "device": DEVICES, "quantizer": QUANTIZERS}.get(group)
    if registry is None:
        return None
    name = node.get("name")
    impl = registry[name] if name in registry else None
    if group == "quantizer":
        return impl.Config if impl is not None else None
    return getattr(impl, "config_type", None) or registry.config_type


def validate_groups(cfg: DictConfig) -> dict[str, object]:
    return {group: check(cfg[group]) for group, check in _validators().items() if cfg.get(group) is not None}
