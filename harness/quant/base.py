"""The quantizer plugin contract and registry.

A quantizer is used in two steps, like gpt-fast's quantizers:

    q = make_quantizer({"name": "edgeflow", "budget_bits": 5})   # config validated here, before any work
    q.calibrate(model, calibration)                              # list of 1-D token-id tensors; statistics cached
    artifact = q.quantize(model, model_name="smollm2-135m")      # harness.artifact.Artifact
    save_artifact(artifact, path)

Contract for an implementation (one module in harness/quant/methods/ plus conf/quantizer/<name>.yaml; see
docs/adding-a-quantizer.md):
- subclass Quantizer, set `name`, decorate with @register;
- implement quantize_linear(name, weight, stats, budget) -> LayerResult: weight is the FP linear's float32 [C, D]
  (C output channels), stats its calibration statistics (calibrate.LinearStats), budget its average bits;
  return codes/bits/w_scale/in_scale (and act_scale unless weight-only) that satisfy docs/quantized-artifact.md;
- optionally declare `Config`, a QuantizerConfig subclass with extra keys, and set runtime_compatible = False with
  a reason when the scheme needs something the runtime lacks (e.g. a float side path).
The base class does the rest: layer selection, bad-input checks, embeddings and norms, the manifest, and the
effective bits per weight (codes + per-channel scale and bit-width + the layer's in_scale and act_scale + any extra
tensors a method stores), so methods are compared on what they really cost in flash.
"""
from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from fnmatch import fnmatchcase
from typing import ClassVar

import torch
from torch import nn
from tqdm.auto import tqdm

from harness.artifact import Artifact, QuantLinear
from harness.models.arch import runtime_config
from harness.quant.calibrate import LinearStats, collect_stats, target_linears
from harness.quant.config import ConfigError, QuantizerConfig
from harness.quant.numerics import quantize_per_channel
from harness.registry import Registry, RegistryError

REGISTRY = Registry("quantizer", package="harness.quant.methods")  # name -> Quantizer subclass
register = REGISTRY.register


def make_quantizer(config: Mapping | QuantizerConfig) -> "Quantizer":
    """Build a registered quantizer from a config mapping (Hydra's `quantizer` group) or a config object."""
    config = quantizer_config(config)
    return _lookup(config.name)(config)


def quantizer_config(config: Mapping | QuantizerConfig) -> QuantizerConfig:
    """Validate a `quantizer` group against its quantizer's Config dataclass (ConfigError names the bad key)."""
    if isinstance(config, QuantizerConfig):
        cls = _lookup(config.name)
        return config if isinstance(config, cls.Config) else cls.Config(**vars(config))
    if hasattr(config, "_metadata"):  # an OmegaConf DictConfig
        from omegaconf import OmegaConf

        config = OmegaConf.to_container(config, resolve=True)
    config = dict(config)
    cls = _lookup(config.get("name", ""))
    allowed = {f.name for f in fields(cls.Config)}
    unknown = sorted(set(config) - allowed)
    if unknown:
        raise ConfigError(f"quantizer {cls.name!r} has no key(s) {unknown}; allowed keys: {sorted(allowed)}")
    return cls.Config(**config)


def _lookup(name: str) -> type["Quantizer"]:
    try:
        return REGISTRY.lookup(name)
    except RegistryError as e:
        raise ConfigError(str(e)) from None


@dataclass
class LayerResult:
    linear: QuantLinear
    extras: dict[str, torch.Tensor] = field(default_factory=dict)  # stored as "<layer>.<key>" (e.g. float paths)
    info: dict = field(default_factory=dict)  # goes into the manifest's entry for the layer (e.g. chosen alpha)


class Quantizer(ABC):
    name: ClassVar[str] = ""
    Config: ClassVar[type[QuantizerConfig]] = QuantizerConfig
    runtime_compatible: ClassVar[bool] = True
    runtime_incompatible_reason: ClassVar[str] = ""

    def __init__(self, config: QuantizerConfig):
        self.config = config
        self.stats: dict[str, LinearStats] | None = None

    def calibrate(self, model: nn.Module, calibration) -> None:
        """Collect (or reuse) input/output statistics of every projection on `calibration` (1-D token tensors)."""
        self.stats = collect_stats(model, calibration, sample_rows=self.config.grid_tokens)

    @abstractmethod
    def quantize_linear(self, name: str, weight: torch.Tensor, stats: LinearStats, budget: float) -> LayerResult:
        """Quantize one linear: weight float32 [C, D] -> LayerResult (see the module docstring)."""

    def quantize(self, model: nn.Module, model_name: str = "model") -> Artifact:
        if self.stats is None:
            raise RuntimeError(f"quantizer {self.name!r}: call calibrate(model, calibration) before quantize(model)")
        targets = target_linears(model)
        selected = select_layers(targets, self.config.layers)
        linears, others, entries = {}, {}, {}
        for name in tqdm(selected, desc=f"quantize {self.name}", unit="linear", leave=False):
            weight = _checked_weight(name, targets[name].weight)
            res = self.quantize_linear(name, weight, self.stats[name], self.config.budget_for(name))
            linears[name] = res.linear
            others.update({f"{name}.{k}": v for k, v in res.extras.items()})
            entries[name] = {**_bits_summary(res.linear.bits), **res.info}
        kept_float = [n for n in targets if n not in selected]
        for name in kept_float:  # not selected: stored in FP16, which the runtime cannot run
            others[f"{name}.weight"] = _checked_weight(name, targets[name].weight).half()
        others.update(self._embeddings_and_norms(model))
        compatible = self.runtime_compatible and not kept_float
        manifest = {
            "model": {"name": model_name, "config": runtime_config(model.config)},
            "quantizer": {"name": self.name, "params": self.config.params()},
            "runtime_compatible": compatible,
            "effective_bits_per_weight": effective_bits(linears, others),
            "linears": entries,
        }
        if not compatible:
            reasons = [self.runtime_incompatible_reason] if not self.runtime_compatible else []
            if kept_float:
                reasons.append(f"{len(kept_float)} projections kept in FP16 (not selected by quantizer.layers)")
            manifest["runtime_incompatible_reason"] = "; ".join(r for r in reasons if r)
        return Artifact(manifest=manifest, linears=linears, others=others)

    def _embeddings_and_norms(self, model: nn.Module) -> dict[str, torch.Tensor]:
        out = {}
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                out[name] = p.detach().float().clone()
        tables = {"model.embed_tokens": model.get_input_embeddings().weight}
        if not model.config.tie_word_embeddings:
            tables["lm_head"] = model.get_output_embeddings().weight
        for name, w in tables.items():
            w = _checked_weight(name, w)
            if self.config.embedding_bits == 16:
                out[f"{name}.weight"] = w.half()
            else:  # per-row INT8 weight-only
                bits = torch.full((w.shape[0],), 8, dtype=torch.int64)
                codes, scale = quantize_per_channel(w, bits)
                out.update({f"{name}.codes": codes, f"{name}.w_scale": scale, f"{name}.bits": bits.to(torch.uint8)})
        return out


def select_layers(targets: dict[str, nn.Linear], patterns: list[str]) -> list[str]:
    """Target linears matched by any glob, in model order; a glob that matches none is an error."""
    for pattern in patterns:
        if not any(fnmatchcase(n, pattern) for n in targets):
            examples = ", ".join(list(targets)[:3])
            raise ValueError(f"quantizer.layers pattern {pattern!r} matches no quantizable linear layer "
                             f"(names look like: {examples}; embeddings and lm_head are set by embedding_bits)")
    return [n for n in targets if any(fnmatchcase(n, p) for p in patterns)]


def effective_bits(linears: dict[str, QuantLinear], others: dict[str, torch.Tensor]) -> float:
    """Stored bits per weight of the quantized linears: codes at their bit-widths, 32-bit w_scale and 8-bit bit-width
    per channel, 32-bit in_scale per input feature and act_scale, plus any extra tensors stored under a layer's name
    (e.g. shadow outliers' float weights)."""
    weights = stored = 0
    for name, q in linears.items():
        c, d = q.codes.shape
        weights += c * d
        stored += int(q.bits.to(torch.int64).sum()) * d + c * (32 + 8) + d * 32 + (32 if q.act_scale is not None else 0)
        stored += sum(t.numel() * t.element_size() * 8 for k, t in others.items() if k.startswith(name + "."))
    return stored / weights if weights else math.nan


def _bits_summary(bits: torch.Tensor) -> dict:
    b = bits.to(torch.int64)
    return {"mean_bits": float(b.float().mean()), "bits_histogram": torch.bincount(b - 1, minlength=8).tolist()}


def _checked_weight(name: str, w: torch.Tensor) -> torch.Tensor:
    w = w.detach().float()
    bad = ~torch.isfinite(w)
    if bool(bad.any()):
        raise ValueError(f"{name}: weight has {int(bad.sum())} NaN/Inf values; refusing to quantize")
    return w
