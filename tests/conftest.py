import pytest

from harness.models.zoo import DEFAULT_MODEL, ModelSpec, load_model_spec


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
