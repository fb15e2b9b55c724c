"""Quantized artifacts cached per (model, quantizer config): every experiment that needs EdgeFlow at 5 bits
quantizes once. Calibration uses the corpus's calibration split, which no test text shares."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from harness.artifact import MANIFEST, save_artifact
from harness.cache import cache_dir, progress_note
from harness.quant.base import make_quantizer, quantizer_config

# Calibration set: 16 windows of 256 tokens (seeded): per-channel maxima settle on a few thousand tokens, and one
# calibration costs ~4k tokens of FP forward passes (~30 s for the default model on 2 idle cores).
CALIBRATION = {"n_samples": 16, "seq_len": 256, "seed": 0}


def artifact_path(model_name: str, config) -> Path:
    params = quantizer_config(config).params()
    key = hashlib.sha256(json.dumps({"q": params, "calib": CALIBRATION}, sort_keys=True).encode()).hexdigest()[:12]
    return cache_dir("artifacts", model_name) / f"{params['name']}-{params['budget_bits']:g}-{key}"


def quantized_artifact(model_spec, config, model=None, tokenizer=None) -> Path:
    """The artifact directory for `model_spec` quantized with `config` (a quantizer config mapping), made if missing."""
    path = artifact_path(model_spec.name, config)
    if (path / MANIFEST).is_file():
        return path
    from harness.data.streams import calibration_tokens
    from harness.models.zoo import load_model

    if model is None:
        model, tokenizer = load_model(model_spec)
    quantizer = make_quantizer(config)
    with progress_note(f"quantizing {model_spec.name} with {quantizer.name} at {quantizer.config.budget_bits:g} bits"):
        calibration = list(calibration_tokens(tokenizer, **CALIBRATION))
        quantizer.calibrate(model, calibration)
        save_artifact(quantizer.quantize(model, model_spec.name), path)
    return path
