"""Offline quantizer: EdgeFlow's NPU-aware adaptive quantization, the paper's baselines, and a plugin API.

    from harness.quant import make_quantizer
    q = make_quantizer({"name": "edgeflow", "budget_bits": 5})
    q.calibrate(model, calibration)          # list of 1-D token-id tensors
    artifact = q.quantize(model, "smollm2-135m")

See base.py for the plugin contract, docs/quantizers.md for the methods, docs/quantized-artifact.md for the output.
"""
from harness.quant.base import REGISTRY, LayerResult, Quantizer, make_quantizer, quantizer_config, register
from harness.quant.config import ConfigError, QuantizerConfig
from harness.quant import methods  # noqa: E402,F401  (registers the built-in quantizers)

__all__ = ["REGISTRY", "ConfigError", "LayerResult", "Quantizer", "QuantizerConfig", "make_quantizer",
           "quantizer_config", "register"]
