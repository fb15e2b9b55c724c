"""The quantized-model artifact: what the quantizer writes and the packers read (docs/quantized-artifact.md).

An artifact is a directory with `manifest.json` and `tensors.safetensors`. Writing is atomic: both files go into a
temporary sibling directory that is renamed into place, so an interrupted run never leaves a half artifact that
looks complete.
"""
from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors.torch import load_file

from harness.cache import atomic_directory
from harness.safetensors_io import write_safetensors

FORMAT = "edgeflow-qartifact"
VERSION = 1
MANIFEST = "manifest.json"
TENSORS = "tensors.safetensors"

# The Llama linear layers the quantizer may quantize, by their module-name suffix.
LINEAR_SUFFIXES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
# A quantized linear's stored tensors, "<module>.<field>" (act_scale absent for weight-only layers, act_bits absent
# for 8-bit activations, out_step absent for float outputs).
LINEAR_FIELDS = ("codes", "bits", "w_scale", "in_scale", "act_scale", "act_bits", "out_step")
ACT_BITS = (8, 16)  # static activations: INT8 (the runtime, HTP) or INT16 (HTP's A16W8 only)


def quantized_linears(tensor_names) -> list[str]:
    """The module names of the quantized linears among an artifact's tensor names (those with `<module>.codes`)."""
    return [n[: -len(".codes")] for n in tensor_names
            if n.endswith(".codes") and n[: -len(".codes")].endswith(LINEAR_SUFFIXES)]


class ArtifactError(ValueError):
    """A quantized-model artifact is missing, malformed or inconsistent."""


@dataclass
class QuantLinear:
    """One quantized linear layer: y = (act_scale * w_scale[c]) * sum_k xq[t,k] * codes[c,k]."""

    codes: torch.Tensor  # int8 [C, D], q in [-2^(b-1), 2^(b-1)-1] for the channel's b
    bits: torch.Tensor  # uint8 [C], 1..8
    w_scale: torch.Tensor  # float32 [C], includes smoothing's S_O^beta
    in_scale: torch.Tensor  # float32 [D], smoothing multiplier on the input (ones when not smoothing)
    act_scale: torch.Tensor | None  # float32 [], static per-tensor activation scale; None = weight-only
    act_bits: int = 8  # activation codes clamp to +-(2^(act_bits-1) - 1) on the act_scale grid; 16 = A16 (HTP's A16W8)
    out_step: torch.Tensor | None = None  # float32 [C]: the output requantized to act_bits on this grid, as an NPU
    # hands it back (quant/numerics.py); None = float outputs, which no NPU computes

    def validate(self, name: str) -> None:
        c, d = self.codes.shape
        _expect(self.codes.dtype == torch.int8, f"{name}.codes must be int8, got {self.codes.dtype}")
        _expect(self.bits.shape == (c,) and self.bits.dtype == torch.uint8, f"{name}.bits must be uint8 [{c}]")
        _expect(self.w_scale.shape == (c,), f"{name}.w_scale must have shape [{c}]")
        _expect(self.in_scale.shape == (d,), f"{name}.in_scale must have shape [{d}]")
        bits = self.bits.to(torch.int32)
        _expect(bool(((bits >= 1) & (bits <= 8)).all()), f"{name}.bits must lie in 1..8")
        lo = -(1 << (bits - 1))
        hi = (1 << (bits - 1)) - 1
        q = self.codes.to(torch.int32)
        ok = (q >= lo[:, None]) & (q <= hi[:, None])
        _expect(bool(ok.all()), f"{name}.codes hold values outside their channel's bit-width")
        for t, label in ((self.w_scale, "w_scale"), (self.in_scale, "in_scale")):
            _expect(bool(torch.isfinite(t).all()), f"{name}.{label} has NaN or Inf")
        if self.act_scale is not None:
            _expect(float(self.act_scale) > 0 and bool(torch.isfinite(self.act_scale)), f"{name}.act_scale must be > 0")
        _expect(self.act_bits in ACT_BITS, f"{name}.act_bits must be one of {ACT_BITS}, got {self.act_bits}")
        _expect(self.act_bits == 8 or self.act_scale is not None, f"{name}.act_bits = 16 needs an act_scale")
        if self.out_step is not None:
            _expect(self.act_scale is not None, f"{name}.out_step needs an act_scale (a weight-only linear has no grid)")
            _expect(self.out_step.shape == (c,) and self.out_step.dtype == torch.float32,
                    f"{name}.out_step must be float32 [{c}]")
            _expect(bool((torch.isfinite(self.out_step) & (self.out_step > 0)).all()),
                    f"{name}.out_step must be positive and finite")

    def dequantized_weight(self) -> torch.Tensor:
        """float32 [C, D]: the weight the runtime effectively multiplies the smoothed input by."""
        return self.codes.float() * self.w_scale[:, None]


@dataclass
class Artifact:
    manifest: dict
    linears: dict[str, QuantLinear]  # module name -> layer, e.g. "model.layers.0.self_attn.q_proj"
    others: dict[str, torch.Tensor] = field(default_factory=dict)  # norms, embeddings, lm_head (see the doc)

    @property
    def config(self) -> dict:
        return self.manifest["model"]["config"]

    @classmethod
    def from_tensors(cls, manifest: dict, tensors: dict[str, torch.Tensor], where: str = "artifact") -> "Artifact":
        """Split a flat {name: tensor} (as stored) into quantized linears and the other tensors; validates."""
        tensors = dict(tensors)
        linears: dict[str, QuantLinear] = {}
        for name in quantized_linears(tensors):
            try:
                q = QuantLinear(
                    codes=tensors.pop(f"{name}.codes"),
                    bits=tensors.pop(f"{name}.bits"),
                    w_scale=tensors.pop(f"{name}.w_scale"),
                    in_scale=tensors.pop(f"{name}.in_scale"),
                    act_scale=tensors.pop(f"{name}.act_scale", None),
                    act_bits=int(tensors.pop(f"{name}.act_bits", torch.tensor(8))),
                    out_step=tensors.pop(f"{name}.out_step", None),
                )
            except KeyError as e:
                raise ArtifactError(f"{where}: quantized layer {name} lacks tensor {e}") from None
            q.validate(name)
            linears[name] = q
        return cls(manifest=manifest, linears=linears, others=tensors)

    def tensors(self) -> dict[str, torch.Tensor]:
        out = dict(self.others)
        for name, q in self.linears.items():
            out[f"{name}.codes"] = q.codes
            out[f"{name}.bits"] = q.bits
            out[f"{name}.w_scale"] = q.w_scale
            out[f"{name}.in_scale"] = q.in_scale
            if q.act_scale is not None:
                out[f"{name}.act_scale"] = q.act_scale
            if q.act_bits != 8:
                out[f"{name}.act_bits"] = torch.tensor(q.act_bits, dtype=torch.uint8)
            if q.out_step is not None:
                out[f"{name}.out_step"] = q.out_step
        return out


def save_artifact(artifact: Artifact, path: str | os.PathLike) -> Path:
    """Validate and write atomically; returns the artifact directory."""
    for name, q in artifact.linears.items():
        q.validate(name)
    return write_artifact_files(path, artifact.manifest, artifact.tensors().items())


def write_artifact_files(path: str | os.PathLike, manifest: dict, tensors: Iterable[tuple[str, object]],
                         keep_existing: bool = False) -> Path:
    """The artifact directory from (name, tensor) pairs written as they come, then the manifest (which may be
    completed while the pairs are produced); atomic: an interrupted write leaves no artifact. keep_existing: a cache
    entry (harness.cache.atomic_directory), which another process may have written meanwhile."""
    path = Path(path)
    with atomic_directory(path, keep_existing) as tmp:
        write_safetensors(tmp / TENSORS, tensors)
        (tmp / MANIFEST).write_text(json.dumps({"format": FORMAT, "version": VERSION, **manifest}, indent=1,
                                               sort_keys=True))
    return path


def load_artifact(path: str | os.PathLike) -> Artifact:
    path = Path(path)
    manifest = read_manifest(path)
    try:
        tensors = load_file(str(path / TENSORS))
    except Exception as e:  # safetensors raises its own error types for truncated or corrupt files
        raise ArtifactError(f"{path / TENSORS}: cannot read ({e})") from None
    return Artifact.from_tensors(manifest, tensors, where=str(path))


def read_manifest(path: str | os.PathLike) -> dict:
    """The manifest of the artifact directory `path`, its format and version checked."""
    path = Path(path)
    if not (path / MANIFEST).is_file() or not (path / TENSORS).is_file():
        raise ArtifactError(f"{path} is not a quantized-model artifact (needs {MANIFEST} and {TENSORS})")
    try:
        manifest = json.loads((path / MANIFEST).read_text())
    except json.JSONDecodeError as e:
        raise ArtifactError(f"{path / MANIFEST}: not valid JSON ({e})") from None
    if manifest.get("format") != FORMAT or manifest.get("version") != VERSION:
        raise ArtifactError(
            f"{path}: format {manifest.get('format')!r} version {manifest.get('version')!r}, "
            f"expected {FORMAT!r} version {VERSION}"
        )
    return manifest


def _expect(ok: bool, message: str) -> None:
    if not ok:
        raise ArtifactError(message)
