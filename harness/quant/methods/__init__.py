"""Built-in quantizers, one module each; importing this package registers them (base.REGISTRY)."""
from harness.quant.methods import cmpq, edgeflow, shadow_outlier, smoothquant, uniform  # noqa: F401
