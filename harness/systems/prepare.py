"""`python -m harness.systems.prepare [MODEL]`: build and convert everything the baselines need for a model (default:
the embedded smollm2-135m) on this host: every system that brings its own weight format (base.baselines(): llama.cpp's
tools and GGUF Q8_0 file, the MNN INT8 export, ...); one that cannot run here says why. Cached: a second run only
prints the paths."""
from __future__ import annotations

import sys

from omegaconf import OmegaConf

from harness.registry import conf_group
from harness.devices import get_device
from harness.models.zoo import DEFAULT_MODEL, load_model_spec
from harness.systems import NotRun, get_system
from harness.systems.base import baselines


def main(model_name: str = DEFAULT_MODEL) -> None:
    model = load_model_spec(model_name)
    device = get_device({"name": "local"})
    for name in baselines():
        try:
            prepared = get_system(OmegaConf.load(conf_group("system") / f"{name}.yaml")).prepare(model, 8, device)
        except NotRun as e:
            print(f"{name}: not run here: {e}")
            continue
        print(f"{name}: {prepared.weight_format}: {', '.join(prepared.files)}")


if __name__ == "__main__":
    main(*sys.argv[1:])
