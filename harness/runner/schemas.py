"""Which dataclass validates which config group. A plugin area adds its group here; `validate_groups` checks every
group present in the composed config before any work starts."""
from __future__ import annotations

from omegaconf import DictConfig

from harness.config import build


def _schemas() -> dict[str, type]:
    # Imported lazily: each area's schema lives beside its code.
    from harness.data.config import DatasetConfig
    from harness.devices.base import DeviceConfig
    from harness.measure.cold import ProtocolConfig
    from harness.measure.prompts import PromptsConfig
    from harness.systems.base import SystemConfig

    return {"system": SystemConfig, "device": DeviceConfig, "protocol": ProtocolConfig, "prompts": PromptsConfig,
            "dataset": DatasetConfig}


def validate_groups(cfg: DictConfig) -> dict[str, object]:
    return {group: build(schema, cfg[group], group) for group, schema in _schemas().items() if cfg.get(group) is not None}
