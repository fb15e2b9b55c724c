"""The one plugin registry: quantizers, packing layouts, systems, devices and experiments register by name.

    QUANTIZERS = Registry("quantizer")
    @QUANTIZERS.register                 # the class's `name` (or NAME) is its key; a second use of a name is an error
    class Rtn(Quantizer): name = "rtn"
    QUANTIZERS.lookup("rtn")             # an unknown name is an error listing the known ones

A registry built with a `config_type` also turns a config (a dataclass or a mapping, e.g. a Hydra node) into the
named implementation: `create(cfg)`; an implementation with its own `config_type` (a subclass of the registry's) gets
its own keys checked, so `system.gguf_type` is valid for llama.cpp and an error naming the key for MNN.
"""
from __future__ import annotations

import dataclasses


class RegistryError(ValueError):
    """An unknown name, or a name registered twice."""


def _key(obj) -> str:
    name = getattr(obj, "name", None) or getattr(obj, "NAME", None)
    if not isinstance(name, str) or not name:
        raise RegistryError(f"{obj!r} has no `name` to register it by")
    return name


class Registry(dict):
    def __init__(self, kind: str, config_type: type | None = None):
        super().__init__()
        self.kind, self.config_type = kind, config_type

    def register(self, obj):
        """Decorator (or call) adding `obj` under its `name`; a name already taken by something else is an error."""
        name = _key(obj)
        same = name in self and (self[name] is obj or (not isinstance(obj, type) and type(self[name]) is type(obj)))
        if name in self and not same:
            raise RegistryError(f"{self.kind} name {name!r} is already registered by {self[name]!r}")
        self[name] = obj
        return obj

    def lookup(self, name: str):
        if name not in self:
            raise RegistryError(f"unknown {self.kind} {name!r}; registered: {', '.join(sorted(self)) or 'none'}")
        return self[name]

    def config(self, cfg):
        """The config dataclass of the implementation `cfg` names, from a dataclass or a mapping with its keys; keys
        the implementation does not take are an error naming them."""
        from harness.config import build

        data = dataclasses.asdict(cfg) if dataclasses.is_dataclass(cfg) else {k: cfg[k] for k in cfg}
        name = data.get("name")
        schema = getattr(self.get(name), "config_type", None) or self.config_type
        if isinstance(cfg, schema):
            return cfg
        return build(schema, data, self.kind)

    def create(self, cfg):
        cfg = self.config(cfg)
        return self.lookup(cfg.name)(cfg)
