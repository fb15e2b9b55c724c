"""Built-in quantizers, one module each; importing this package imports every module here, and each registers its
quantizer (base.REGISTRY), so a new quantizer is its module plus its conf/quantizer/*.yaml."""
import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
