"""Quantized artifacts cached per (model, quantizer config): every experiment that needs EdgeFlow at 5 bits
quantizes once. Calibration uses the corpus's calibration split, which no test text shares."""
from __future__ import annotations

import hashlib
import inspect
import json
import time
from pathlib import Path

from harness.artifact import MANIFEST
from harness.cache import cache_dir, exclusive, progress_note
from harness.cache_ledger import cache_hit
from harness.quant.base import REGISTRY, make_quantizer, quantizer_config

# Calibration set: 16 windows of 256 tokens (seeded): per-channel maxima settle on a few thousand tokens, and one
# calibration costs ~4k tokens of FP forward passes (~30 s for the default model on 2 idle cores).
CALIBRATION = {"n_samples": 16, "seq_len": 256, "seed": 0}


# A quantizer that needs the whole model holds it in float32 several times: AIMET has the torch model, its ONNX export,
# the simulation's copy and ONNX Runtime's session of it (an estimate: 4 copies of 4 bytes per parameter).
WHOLE_MODEL_BYTES_PER_PARAM = 16


def _check_whole_model_fits(name: str, checkpoint: Path) -> None:
    """Refuse before loading what would be OOM-killed minutes later (paper-size models on a small host)."""
    from harness.host import memory_shortfall

    if short := memory_shortfall(checkpoint, WHOLE_MODEL_BYTES_PER_PARAM):
        need, params, available = short
        raise MemoryError(f"quantizer {name!r} runs on the whole model in memory: about {need / 1e9:.0f} GB for "
                          f"{params / 1e9:.1f}B parameters ({WHOLE_MODEL_BYTES_PER_PARAM} bytes per parameter), and "
                          f"this host has {available / 1e9:.0f} GB available")


def code_digest(own: Path | None, package: Path = Path(__file__).parent) -> str:
    """The source an artifact depends on: harness/quant's shared modules and the quantizer's own module `own`
    (methods/<name>.py, or a plugin's file anywhere). An algorithm change must not reuse artifacts made by the old
    code; an edit to one quantizer's module re-quantizes that quantizer's artifacts only. A quantizer whose module has
    no file (defined in a notebook or exec'd) depends on every module under harness/quant."""
    h = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        if path.parent.name != "methods" or own is None:
            h.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes())
    if own is not None:
        h.update(b"own\0" + Path(own).read_bytes())
    return h.hexdigest()


def _own_module(cls) -> Path | None:
    try:
        return Path(inspect.getfile(cls))
    except (TypeError, OSError):  # a class of a module without a file
        return None


def artifact_path(model_name: str, config) -> Path:
    config = quantizer_config(config)
    params = config.params()
    own = _own_module(REGISTRY.lookup(config.name))  # the class, not an instance: nothing is built to name a path
    identity = {"q": params, "calib": CALIBRATION, "code": code_digest(own)}
    key = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:12]
    return cache_dir("artifacts", model_name) / f"{params['name']}-{params['budget_bits']:g}-{key}"


def quantized_artifact(model_spec, config, tokenizer=None) -> Path:
    """The artifact directory for `model_spec` quantized with `config` (a quantizer config mapping), made if missing
    from the checkpoint on disk, one layer in memory at a time (harness.quant.stream)."""
    path = artifact_path(model_spec.name, config)
    if (path / MANIFEST).is_file():
        cache_hit("quantized artifact", path)
        return path
    with exclusive(path.with_name(path.name + ".lock")):  # parallel jobs wanting one artifact: one makes it
        if (path / MANIFEST).is_file():
            cache_hit("quantized artifact", path)
            return path
        return _make_artifact(model_spec, config, path, tokenizer)


def _make_artifact(model_spec, config, path: Path, tokenizer) -> Path:
    from transformers import AutoTokenizer

    from harness.data.streams import calibration_tokens
    from harness.models.zoo import checkpoint_dir
    from harness.quant.stream import checkpoint_stats, write_artifact

    checkpoint = checkpoint_dir(model_spec)
    tokenizer = tokenizer or AutoTokenizer.from_pretrained(checkpoint)
    quantizer = make_quantizer(config)
    with progress_note(f"quantizing {model_spec.name} with {quantizer.name} at {quantizer.config.budget_bits:g} bits",
                       ledger=("quantized artifact", path)):
        calibration = list(calibration_tokens(tokenizer, **CALIBRATION))
        t0 = time.perf_counter()
        if quantizer.needs_model:  # e.g. AIMET, whose flow runs on the whole graph at once
            from harness.models.zoo import load_model

            _check_whole_model_fits(quantizer.name, checkpoint)
            quantizer.calibrate(load_model(model_spec)[0], calibration)
        else:  # statistics are cached per checkpoint and calibration: often ~0 s after the first quantizer
            quantizer.stats = checkpoint_stats(model_spec.name, checkpoint, calibration, quantizer.config.grid_tokens,
                                               gram=quantizer.needs_gram)
        t1 = time.perf_counter()
        # parallel sweeps may quantize the same config at once: the first to finish keeps its artifact
        write_artifact(checkpoint, quantizer, model_spec.name, path, manifest={"timing_s": {"calibrate": t1 - t0}},
                       keep_existing=True)
    return path
