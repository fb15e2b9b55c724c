"""Quantizing a checkpoint on disk layer by layer, so memory holds one decoder layer, never the whole model: the
paper's 1.8B-8B models quantize on a workstation (docs/paper-size.md).

Two passes over the FP16 safetensors checkpoint, neither loading the model:
  calibrate  the calibration tokens' hidden states go through the FP decoder layers one at a time (each read from
             disk into a meta-device skeleton of the model, run, and freed); the statistics of each layer's
             projections (calibrate.LinearStats) are appended to a stats file cached per (checkpoint, calibration,
             rows, seed), so every quantizer and budget of a sweep reuses one calibration.
  quantize   each projection read alone, quantized with its statistics (Quantizer.quantized_tensors), and appended to
             the artifact's tensor file as it comes (harness.safetensors_io).
Peak memory: one decoder layer in FP32 and the calibration hidden states [tokens, H] (calibrate), one projection in
FP32 and its quantization's temporaries (quantize). The statistics equal collect_stats's on the loaded model
(tests/quant/test_stream.py), so both paths give the same artifact.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import torch
from tqdm.auto import tqdm

from harness.artifact import write_artifact_files
from harness.cache import cache_dir, progress_note
from harness.cache_ledger import cache_hit
from harness.quant.calibrate import (LinearStats, StatsCollector, tokens_digest, check_calibration, sample_picks,
                                     target_linears)
from harness.safetensors_io import CheckpointReader, SafetensorsReader, return_freed_memory, write_safetensors

STATS_FIELDS = ("in_max", "out_max", "rows", "gram")  # gram only in files made with gram=True, once per input


class LayerStream:
    """A checkpoint's decoder layers, one at a time: a skeleton of the model on the meta device (no memory), whose
    layer i is given its FP32 weights from disk for the duration of a `with stream.layer(i)` block."""

    def __init__(self, checkpoint: Path):
        from transformers import AutoConfig, AutoModelForCausalLM

        return_freed_memory()
        self.config = AutoConfig.from_pretrained(checkpoint)
        self.weights = CheckpointReader(checkpoint)
        with torch.device("meta"):
            self.body = AutoModelForCausalLM.from_config(self.config).model
        self.rotary = type(self.body.rotary_emb)(config=self.config)  # on the CPU: its inv_freq buffer computed

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        """float32 [1, T, H]: the embedding rows of token ids [T], read row by row (not the whole table)."""
        name = "model.embed_tokens.weight"
        rows = {int(i): self.weights.read_rows(name, int(i), int(i) + 1) for i in torch.unique(ids)}
        return torch.cat([rows[int(i)] for i in ids]).float()[None]

    @contextlib.contextmanager
    def layer(self, index: int):
        module = self.body.layers[index]
        prefix = f"model.layers.{index}."
        module.load_state_dict({k: self.weights.read(prefix + k).float() for k in module.state_dict()}, assign=True)
        try:
            yield module
        finally:
            module.to("meta")  # frees the weights

    def forward(self, layer, hidden: torch.Tensor) -> torch.Tensor:
        """One decoder layer over one sequence's hidden states [1, T, H], as the model's own forward calls it."""
        from transformers.masking_utils import create_causal_mask

        positions = torch.arange(hidden.shape[1])[None]
        mask = create_causal_mask(config=self.config, inputs_embeds=hidden, attention_mask=None, cache=None,
                                  position_ids=positions)
        out = layer(hidden, attention_mask=mask, position_embeddings=self.rotary(hidden, positions),
                    position_ids=positions, use_cache=False)
        return out[0] if isinstance(out, tuple) else out


class StatsFile(Mapping):
    """The calibration statistics of a stats file, {linear name: LinearStats}, each read when asked for."""

    def __init__(self, path: Path):
        self.path = path
        self._reader = SafetensorsReader(path)
        self._stored = set(self._reader.names())
        self._names = [n[: -len(".in_max")] for n in self._stored if n.endswith(".in_max")]

    def __getitem__(self, name: str) -> LinearStats:
        if name not in self._names:
            raise KeyError(f"{self.path} has no calibration statistics for {name!r}")
        stored = (self._reader.metadata.get(f"{name}.{f}", f"{name}.{f}") for f in STATS_FIELDS)  # (shared Grams)
        return LinearStats(*(self._reader.read(key) if key in self._stored else None for key in stored))

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


def checkpoint_stats(model_name: str, checkpoint: Path, calibration, sample_rows: int, seed: int = 0,
                     gram: bool = False) -> StatsFile:
    """The statistics of every projection of the checkpoint on `calibration` (1-D token tensors), with Gram matrices
    if gram, from the cache or made with one layer in memory at a time."""
    checkpoint = Path(checkpoint)
    calibration = check_calibration(calibration, json.loads((checkpoint / "config.json").read_text())["vocab_size"])
    identity = [_checkpoint_identity(checkpoint), tokens_digest(calibration), sample_rows, seed, _code_digest()]
    key = hashlib.sha256(json.dumps(identity + ([True] if gram else [])).encode()).hexdigest()[:16]
    path = cache_dir("calibration", model_name) / f"stats-{key}.safetensors"
    if path.is_file():
        cache_hit("calibration statistics", path)
    else:
        with progress_note(f"calibration statistics of {model_name}", ledger=("calibration statistics", path)):
            write_stats(path, checkpoint, calibration, sample_rows, seed, gram)
    return StatsFile(path)


def write_stats(path: Path, checkpoint: Path, calibration, sample_rows: int, seed: int = 0,
                gram: bool = False) -> Path:
    """Run the calibration through the checkpoint's layers one at a time; write the statistics file `path`."""
    stream = LayerStream(Path(checkpoint))
    calibration = check_calibration(calibration, stream.config.vocab_size)
    picks = sample_picks(calibration, sample_rows, seed)
    shared: dict[str, str] = {}  # filled as the layers pass; the file's metadata
    try:
        return write_safetensors(path, _layer_stats(stream, calibration, picks, gram, shared), metadata=shared)
    finally:
        stream.weights.close()


def _layer_stats(stream: LayerStream, calibration, picks, gram: bool,
                 shared: dict[str, str]) -> Iterator[tuple[str, torch.Tensor]]:
    """The statistics' tensors layer by layer; a Gram matrix shared by linears with one input (q, k, v; gate, up) is
    stored once, under the first, and `shared` maps the others' "<name>.gram" to its name."""
    hidden = [stream.embed(seq) for seq in calibration]  # float32 [1, T, H] per sequence
    for index in tqdm(range(stream.config.num_hidden_layers), desc="calibration", unit="layer", leave=False):
        with stream.layer(index) as layer, torch.inference_mode():
            linears = {f"model.layers.{index}.{n}": m for n, m in target_linears(layer).items()}
            with StatsCollector(linears, picks, gram) as collector:
                for s, h in enumerate(hidden):
                    with collector.sequence(h.shape[1]):
                        hidden[s] = stream.forward(layer, h)
        owners = collector.gram_owners()
        for name, stats in collector.stats().items():
            for field in STATS_FIELDS:
                if field == "gram" and owners.get(name, name) != name:
                    shared[f"{name}.gram"] = f"{owners[name]}.gram"
                elif getattr(stats, field) is not None:
                    yield f"{name}.{field}", getattr(stats, field)


def write_artifact(checkpoint: Path, quantizer, model_name: str, out: Path, manifest: dict | None = None,
                   keep_existing: bool = False) -> Path:
    """The artifact of `quantizer` (its stats set, e.g. to a StatsFile) over the checkpoint, one projection in memory
    at a time; `manifest` holds extra keys (its timing_s gets "quantize": seconds to quantize and write);
    keep_existing for a cache entry (artifact.write_artifact_files)."""
    from transformers import AutoConfig

    manifest = {} if manifest is None else manifest
    return_freed_memory()
    weights = CheckpointReader(checkpoint)
    try:
        tensors = quantizer.quantized_tensors(weights, AutoConfig.from_pretrained(checkpoint), model_name, manifest)
        return write_artifact_files(out, manifest, _timed(tensors, manifest), keep_existing)
    finally:
        weights.close()


def _timed(tensors, manifest: dict):
    start = time.perf_counter()
    yield from tensors
    manifest.setdefault("timing_s", {})["quantize"] = time.perf_counter() - start


def _checkpoint_identity(checkpoint: Path) -> list:
    """config.json and every weights file's name, size and modification time: a rewritten checkpoint is new."""
    files = sorted(checkpoint.glob("*.safetensors"))
    return [(checkpoint / "config.json").read_text()] + [(f.name, f.stat().st_size, f.stat().st_mtime_ns)
                                                           for f in files]


def _code_digest() -> str:
    h = hashlib.sha256()
    for module in ("calibrate.py", "stream.py"):
        h.update((Path(__file__).parent / module).read_bytes())
    return h.hexdigest()
