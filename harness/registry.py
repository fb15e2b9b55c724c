"""A plugin registry: implementations register by their `name`; `create` builds one from its config dataclass."""
from __future__ import annotations


class Registry(dict):
    def __init__(self, kind: str, config_type: type):
        super().__init__()
        self.kind, self.config_type = kind, config_type

    def register(self, cls):
        """Class decorator: `@DEVICES.register`."""
        self[cls.name] = cls
        return cls

    def config(self, cfg):
        """The config dataclass from itself or from a mapping with its keys (e.g. a Hydra node)."""
        return cfg if isinstance(cfg, self.config_type) else self.config_type(**{k: cfg[k] for k in cfg})

    def create(self, cfg):
        cfg = self.config(cfg)
        return self[cfg.name](cfg)
