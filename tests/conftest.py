import os
import shutil
import uuid

import pytest

from harness.models.zoo import DEFAULT_MODEL, ModelSpec, load_model_spec


def pytest_configure(config):
    """Under pytest-xdist (`make test` runs `-n logical`), each worker's torch and the processes its tests start get
    the worker's share of the cores, so that N workers do not run N x cores threads (torch's spinning threads slow
    each other down when oversubscribed). Set before anything imports torch; a test may still ask for more."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1:
        share = str(max(1, (os.cpu_count() or 1) // workers))
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(var, share)


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist, the long tests (slow, then real_model and native) go first: a worker that draws a
    two-minute test last leaves the others idle at the end. Otherwise collection order."""
    if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
        items.sort(key=lambda item: (item.get_closest_marker("slow") is None,
                                     not any(item.get_closest_marker(m) for m in ("real_model", "native"))))


@pytest.fixture(scope="session")
def default_model_spec() -> ModelSpec:
    """The embedded default model's spec, read from its Hydra config like the app does."""
    return load_model_spec(DEFAULT_MODEL)


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory, default_model_spec):
    """A tiny random Llama (2 layers, width 64) with the default model's tokenizer, so llama.cpp converts it too."""
    from transformers import AutoTokenizer

    from harness.models.zoo import checkpoint_dir
    from tests.tiny_llama import tiny_llama

    tokenizer = AutoTokenizer.from_pretrained(checkpoint_dir(default_model_spec))
    # Seeded, so the artifacts and GGUF cached under its name always hold the same weights.
    model = tiny_llama(hidden=64, intermediate=128, layers=2, heads=4, kv_heads=2, vocab=len(tokenizer), tie=True)
    path = tmp_path_factory.mktemp("tiny-llama")
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture
def fresh_model_name():
    """fresh_model_name(prefix) -> `<prefix>-<8 hex>`, a model name no cache has seen, so a test's points really
    calibrate, quantize, pack and score; afterwards every cache folder under that name (artifacts, packed,
    calibration, ppl-windows, ...) is removed, or they pile up with every run of the suite."""
    from harness.cache import cache_root

    names = []

    def make(prefix: str) -> str:
        names.append(f"{prefix}-{uuid.uuid4().hex[:8]}")
        return names[-1]

    yield make
    for name in names:
        for folder in cache_root().glob(f"*/{name}"):
            shutil.rmtree(folder, ignore_errors=True)
