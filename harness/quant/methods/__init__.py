"""Built-in quantizers, one module each; importing this package registers them (base.REGISTRY)."""
from harness.quant.methods import cmpq, edgeflow, rtn_clip, shadow_outlier, smoothquant, uniform  # noqa: F401
