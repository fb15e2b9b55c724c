"""Typed, validated views of the Hydra config: every group is checked against its dataclass before any work starts.

Each group's schema is a dataclass whose `__post_init__` raises ValueError naming the key and the allowed values;
`typed(cfg)` turns those into ConfigError with the group named, so a bad value fails in milliseconds, not after an
hour of conversion or calibration.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

from omegaconf import DictConfig, OmegaConf


class ConfigError(ValueError):
    """A configuration value is invalid; the message names the key."""


def build(schema: type, node: Any, group: str):
    """Instantiate `schema` from a config node, naming `group` in every error."""
    data = OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else dict(node or {})
    allowed = [f.name for f in dataclasses.fields(schema)]
    unknown = sorted(set(data) - set(allowed))
    if unknown:
        raise ConfigError(f"{group}: unknown key(s) {unknown}; allowed keys: {allowed}")
    try:
        return schema(**data)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{group}: {e}") from None


def require(ok: bool, key: str, message: str) -> None:
    """For schemas' __post_init__: `require(1 <= bits <= 8, "bits", f"must lie in 1..8, got {bits}")`."""
    if not ok:
        raise ValueError(f"{key} {message}")


def config_hash(cfg: DictConfig, ignore: tuple[str, ...] = ("run",)) -> str:
    """Identity of a measurement configuration: run-control keys (resume, output folders) do not change it."""
    data = OmegaConf.to_container(cfg, resolve=True)
    for key in ignore:
        data.pop(key, None)
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]
