"""The one plugin registry: quantizers, packing layouts, systems, devices and experiments register by name.

    QUANTIZERS = Registry("quantizer")
    @QUANTIZERS.register                 # the class's `name` (or NAME) is its key; a second use of a name is an error
    class Rtn(Quantizer): name = "rtn"
    QUANTIZERS.lookup("rtn")             # an unknown name is an error listing the known ones

A registry built with a `package` finds an implementation it has not seen yet in `<package>.<name>` (a system named
`toy` in harness/systems/toy.py), so a new plugin is its module and its YAML, with no list to edit.

A registry built with a `config_type` also turns a config (a dataclass or a mapping, e.g. a Hydra node) into the
named implementation: `create(cfg)`; an implementation with its own `config_type` (a subclass of the registry's) gets
its own keys checked, so `system.gguf_type` is valid for llama.cpp and an error naming the key for MNN.
"""
from __future__ import annotations

import dataclasses
import importlib
import importlib.util
from pathlib import Path


CONF_DIR = Path(__file__).resolve().parents[1] / "conf"  # the one place the config tree's location is written


def conf_group(group: str) -> Path:
    """conf/<group>/, looked up when called (so a test's copy of conf/ is seen everywhere)."""
    return CONF_DIR / group


class RegistryError(ValueError):
    """An unknown name, or a name registered twice."""


def _key(obj) -> str:
    name = getattr(obj, "name", None) or getattr(obj, "NAME", None)
    if not isinstance(name, str) or not name:
        raise RegistryError(f"{obj!r} has no `name` to register it by")
    return name


class Registry(dict):
    def __init__(self, kind: str, config_type: type | None = None, package: str | None = None):
        super().__init__()
        self.kind, self.config_type, self.package = kind, config_type, package

    def __contains__(self, name) -> bool:
        return super().__contains__(name) or self._discover(name)

    def load_all(self, group: str) -> None:
        """Discover the implementation of every conf/<group>/<name>.yaml (so error messages list them all)."""
        for path in sorted((CONF_DIR / group).glob("*.yaml")):
            self._discover(path.stem)

    def _discover(self, name) -> bool:
        """Import <package>.<name> if that module exists (it registers itself); True if `name` is now known."""
        if not (self.package and isinstance(name, str) and name.isidentifier()):
            return False
        if importlib.util.find_spec(f"{self.package}.{name}") is None:
            return False
        importlib.import_module(f"{self.package}.{name}")
        return super().__contains__(name)

    def register(self, obj):
        """Decorator (or call) adding `obj` under its `name`; a name already taken by something else is an error."""
        name = _key(obj)
        taken = dict.__contains__(self, name)  # no discovery: `obj`'s own module may be importing right now
        same = taken and (self[name] is obj or (not isinstance(obj, type) and type(self[name]) is type(obj)))
        if taken and not same:
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
        schema = getattr(self[name] if name in self else None, "config_type", None) or self.config_type
        if isinstance(cfg, schema):
            return cfg
        return build(schema, data, self.kind)

    def create(self, cfg):
        cfg = self.config(cfg)
        return self.lookup(cfg.name)(cfg)
