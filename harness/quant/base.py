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
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from fnmatch import fnmatchcase
from typing import ClassVar

import torch
from torch import nn
from tqdm.auto import tqdm

from harness.artifact import LINEAR_SUFFIXES, Artifact, QuantLinear
from harness.models.arch import runtime_config
from harness.quant.a16 import a16_gain, at_width, choose_a16
from harness.quant.allocate import allocate_two_level
from harness.quant.calibrate import LinearStats, collect_stats
from harness.quant.config import ConfigError, QuantizerConfig
from harness.quant.metric import relative_error
from harness.quant.numerics import quantize_per_channel
from harness.quant.outputs import numerics_summary, with_output_grid
from harness.quant.spool import ResultSpool
from harness.registry import Registry, RegistryError
from harness.safetensors_io import Chunks, TensorDict

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
    weight_roundings: ClassVar[tuple[str, ...]] = ("nearest",)  # the config.weight_rounding values it implements
    needs_model: ClassVar[bool] = False  # calibrate() needs the loaded model, not only the per-layer statistics
    budgets: ClassVar[tuple[int, ...] | None] = None  # the budget_bits it accepts (None: any in [1, 8])

    def __init__(self, config: QuantizerConfig):
        if config.weight_rounding not in self.weight_roundings:
            raise ConfigError(f"quantizer {self.name!r} has no weight_rounding={config.weight_rounding!r}; "
                              f"it implements {' or '.join(self.weight_roundings)}")
        self.config = config
        self.stats: dict[str, LinearStats] | None = None

    @property
    def needs_gram(self) -> bool:
        """Whether quantize_linear reads stats.gram (calibrate.py collects it only when asked: D^2 per linear)."""
        return self.config.weight_rounding == "gptq"

    def calibrate(self, model: nn.Module, calibration) -> None:
        """Collect (or reuse) input/output statistics of every projection on `calibration` (1-D token tensors)."""
        self.stats = collect_stats(model, calibration, sample_rows=self.config.grid_tokens, gram=self.needs_gram)

    @abstractmethod
    def quantize_linear(self, name: str, weight: torch.Tensor, stats: LinearStats, budget: float) -> LayerResult:
        """Quantize one linear: weight float32 [C, D] -> LayerResult (see the module docstring)."""

    @property
    def chooses_per_width(self) -> bool:
        """Whether quantize_widths' choices depend on the width (by default they do not)."""
        return False

    def quantize_widths(self, name: str, weight: torch.Tensor, stats: LinearStats, budget: float,
                        widths: tuple[int, ...]) -> dict[int, LayerResult]:
        """quantize_linear for a linear whose activations will be w (8 or 16) bits wide, for each w in `widths`, each
        still returned with its 8-bit activation grid over the calibrated range (the base class gives it its grid at
        that width: a16.at_width). By default the width changes nothing: one result serves every width; a quantizer
        that chooses per width (chooses_per_width) overrides this, sharing what the widths have in common."""
        return dict.fromkeys(widths, self.quantize_linear(name, weight, stats, budget))

    def quantize_at_width(self, name: str, weight: torch.Tensor, stats: LinearStats, budget: float,
                          act_bits: int) -> LayerResult:
        """quantize_widths for one width."""
        return self.quantize_widths(name, weight, stats, budget, (act_bits,))[act_bits]

    def quantize(self, model: nn.Module, model_name: str = "model") -> Artifact:
        """The artifact of a loaded model, in memory (harness.quant.stream writes one from a checkpoint instead)."""
        manifest: dict = {}
        weights = TensorDict(dict(model.named_parameters()))
        tensors = {name: t.materialize() if isinstance(t, Chunks) else t
                   for name, t in self.quantized_tensors(weights, model.config, model_name, manifest)}
        return Artifact.from_tensors(manifest, tensors)

    def quantized_tensors(self, weights, config, model_name: str, manifest: dict) -> Iterator[tuple[str, object]]:
        """The artifact's tensors (name, tensor or Chunks) one at a time, so a writer can drop each once written;
        `manifest` is filled in when the iteration ends. weights: names() and read(name) / read_rows(name, a, b) of
        the FP parameters (a loaded model or a checkpoint on disk); config: the model's Hugging Face config."""
        if self.stats is None:
            raise RuntimeError(f"quantizer {self.name!r}: call calibrate(model, calibration) before quantize(model)")
        targets = linear_names(weights.names())
        selected = select_layers(targets, self.config.layers)
        entries, tally, wide = yield from self._quantized_linears(weights, selected)
        kept_float = [n for n in targets if n not in selected]
        for name in kept_float:  # not selected: stored in FP16, which the runtime cannot run
            yield f"{name}.weight", _checked_weight(name, weights.read(f"{name}.weight")).half()
        yield from self._embeddings_and_norms(weights, config, manifest)
        compatible = self.runtime_compatible and not kept_float
        model_config = runtime_config(config)
        if manifest["lm_head"].get("copy_of_tied_embedding"):  # the artifact's LM head is its own table now
            model_config["tie_word_embeddings"] = False
        manifest.update({
            "model": {"name": model_name, "config": model_config},
            "quantizer": {"name": self.name, "params": self.config.params()},
            "runtime_compatible": compatible,
            "effective_bits_per_weight": tally.bits_per_weight,
            "numerics": numerics_summary(self.config.output_grid, self.config.output_headroom, wide, len(selected)),
            "linears": entries,
        })
        if not compatible:
            reasons = [self.runtime_incompatible_reason] if not self.runtime_compatible else []
            if kept_float:
                reasons.append(f"{len(kept_float)} projections kept in FP16 (not selected by quantizer.layers)")
            manifest["runtime_incompatible_reason"] = "; ".join(r for r in reasons if r)

    def _quantized_linears(self, weights, selected: list[str]):
        """The selected linears' tensors, one linear at a time; returns their manifest entries, BitsTally and the
        number given 16-bit activations."""
        entries, tally, wide = {}, BitsTally(), 0
        with ResultSpool([LayerResult, QuantLinear]) as spool:
            a16 = self._a16_linears(weights, selected, spool) if self.config.a16_budget > 0 else set()
            for name in tqdm(selected, desc=f"quantize {self.name}", unit="linear", leave=False):
                width = 16 if name in a16 else 8
                res = spool.take(name, width)
                if res is None:  # (no A16 pass)
                    weight = _checked_weight(name, weights.read(f"{name}.weight"))
                    res = self.quantize_at_width(name, weight, self.stats[name], self.config.budget_for(name), width)
                    del weight
                res.linear = at_width(res.linear, width, self.config)  # its input grid at its width
                res.info["act_bits"] = int(res.linear.act_bits)  # every linear's width, in the manifest
                res.linear = with_output_grid(res.linear, self.stats[name].out_max, self.config.output_grid,
                                              self.config.output_headroom)
                res.linear.validate(name)
                wide += res.linear.act_bits == 16
                extras = {f"{name}.{k}": v for k, v in res.extras.items()}
                tally.add(res.linear, extras.values())
                entries[name] = {**_bits_summary(res.linear.bits), **res.info}
                yield from Artifact(manifest={}, linears={name: res.linear}, others=extras).tensors().items()
        return entries, tally, wide

    def _a16_linears(self, weights, selected: list[str], spool: ResultSpool) -> set[str]:
        """The linears to give 16-bit activations (a16.py), each quantized for both widths (one result for both
        unless the quantizer chooses per width) to measure its gain; the results are left in `spool` for the main
        pass to take the one of the width it gets."""
        gains, macs = {}, {}
        for name in tqdm(selected, desc="A16 sensitivity", unit="linear", leave=False):
            weight = _checked_weight(name, weights.read(f"{name}.weight"))
            stats = self.stats[name]
            results = self.quantize_widths(name, weight, stats, self.config.budget_for(name), (8, 16))
            q8, q16 = results[8].linear, results[16].linear
            if q8.act_scale is not None:
                gains[name] = a16_gain(q8, weight, stats.rows, stats.out_max, self.config, q16=q16)
                macs[name] = weight.numel()
            spool.put(name, results)
        return choose_a16(gains, macs, self.config.a16_budget)

    def allocate_rows(self, re: torch.Tensor, budget: float) -> torch.Tensor:
        """Bit-width per row of a weight-only table (the LM head under lm_head=budget) from its rows' relative errors
        re [rows, 8] (metric.py, config.re_metric), averaging `budget`: two adjacent precisions by RE (CMPQ's rule;
        every row at the budget when it is an integer). EdgeFlow allocates its head as its linears (greedy)."""
        return allocate_two_level(re, budget)

    def _embeddings_and_norms(self, weights, config, manifest: dict) -> Iterator[tuple[str, object]]:
        """Norms in FP32; the embedding table in FP16 or per-row INT8; the LM head like the embedding ("table") or
        at the bit budget ("budget", weight-only rows; a tied table gets its own copy), in row blocks."""
        for name in weights.names():
            if name.endswith("norm.weight"):
                yield name, weights.read(name).float().clone()  # (a copy: never the model's own parameter)
        tied, head = bool(config.tie_word_embeddings), self.config.lm_head
        head_bits = None  # the LM head's mean width, when it is a table of its own
        tables = [("model.embed_tokens", "model.embed_tokens", None)]  # (name, source table, row budget or None)
        if not tied or head == "budget":
            tables.append(("lm_head", "model.embed_tokens" if tied else "lm_head",
                           self.config.budget_for("lm_head") if head == "budget" else None))
        # blocks no larger than the largest projection, so a table costs no more memory than a linear does
        largest = max((math.prod(weights.shape(f"{n}.weight")) for n in linear_names(weights.names())), default=0)
        for name, source, budget in tables:
            rows, dim = weights.shape(f"{source}.weight")
            step = max(1, largest // dim) if largest else rows
            blocks = [(a, min(a + step, rows)) for a in range(0, rows, step)]

            def block(a, b, name=name, source=source):
                return _checked_weight(name, weights.read_rows(f"{source}.weight", a, b))
            if budget is None and self.config.embedding_bits == 16:
                yield f"{name}.weight", Chunks(torch.float16, (rows, dim), (block(a, b).half() for a, b in blocks))
                head_bits = 16.0 if name == "lm_head" else head_bits
                continue
            # per-row weight-only: rows are independent, so blocks give the whole table's result; under a budget the
            # rows' widths are allocated over the whole table first (its RE is [rows, 8]: one more pass over blocks)
            widths = torch.full((rows,), 8, dtype=torch.int64) if budget is None else self.allocate_rows(
                torch.cat([relative_error(block(a, b), self.config.re_metric) for a, b in blocks]), budget)
            scales = []

            def codes(scales=scales, widths=widths, block=block, blocks=blocks):
                for a, b in blocks:
                    c, s = quantize_per_channel(block(a, b), widths[a:b])
                    scales.append(s)
                    yield c
            yield f"{name}.codes", Chunks(torch.int8, (rows, dim), codes())
            yield f"{name}.w_scale", torch.cat(scales)  # (filled while the consumer took the codes' blocks)
            yield f"{name}.bits", widths.to(torch.uint8)
            head_bits = float(widths.double().mean()) if name == "lm_head" else head_bits
        manifest["lm_head"] = ({"storage": "table", "tied_to": "model.embed_tokens"} if len(tables) == 1 else
                               {"storage": head, "bits_per_weight": head_bits, "copy_of_tied_embedding": tied})


def linear_names(parameter_names) -> list[str]:
    """The quantizable projections (module names) among parameter names, in model order (layer, then module)."""
    names = [n[: -len(".weight")] for n in parameter_names
             if n.endswith(".weight") and n[: -len(".weight")].endswith(LINEAR_SUFFIXES)]
    return sorted(names, key=_model_order)


def _model_order(name: str):
    parts = name.split(".")
    layer = next((int(p) for p in parts if p.isdigit()), -1)
    return layer, LINEAR_SUFFIXES.index(parts[-1]), name


def select_layers(targets: list[str], patterns: list[str]) -> list[str]:
    """Target linears matched by any glob, in model order; a glob that matches none is an error."""
    for pattern in patterns:
        if not any(fnmatchcase(n, pattern) for n in targets):
            examples = ", ".join(list(targets)[:3])
            raise ValueError(f"quantizer.layers pattern {pattern!r} matches no quantizable linear layer "
                             f"(names look like: {examples}; embeddings and lm_head are set by embedding_bits)")
    return [n for n in targets if any(fnmatchcase(n, p) for p in patterns)]


class BitsTally:
    """Stored bits per weight of the quantized linears, summed as they pass: codes at their bit-widths, 32-bit
    w_scale and 8-bit bit-width per channel, 32-bit in_scale per input feature and act_scale, plus any extra tensors
    stored under a layer's name (e.g. shadow outliers' float weights)."""

    def __init__(self):
        self.weights = self.stored = 0

    def add(self, q: QuantLinear, extras=()) -> None:
        c, d = q.codes.shape
        self.weights += c * d
        self.stored += int(q.bits.to(torch.int64).sum()) * d + c * (32 + 8) + d * 32
        self.stored += 32 if q.act_scale is not None else 0
        self.stored += sum(t.numel() * t.element_size() * 8 for t in extras)

    @property
    def bits_per_weight(self) -> float:
        return self.stored / self.weights if self.weights else math.nan


def _bits_summary(bits: torch.Tensor) -> dict:
    b = bits.to(torch.int64)
    return {"mean_bits": float(b.float().mean()), "bits_histogram": torch.bincount(b - 1, minlength=8).tolist()}


def _checked_weight(name: str, w: torch.Tensor) -> torch.Tensor:
    w = w.detach().float()
    bad = ~torch.isfinite(w)
    if bool(bad.any()):
        raise ValueError(f"{name}: weight has {int(bad.sum())} NaN/Inf values; refusing to quantize")
    return w
