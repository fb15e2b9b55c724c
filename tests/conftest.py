import pytest

from harness.models.zoo import ModelSpec


@pytest.fixture(scope="session")
def default_model_spec() -> ModelSpec:
    """The embedded default model's spec, read from its Hydra config like the app does."""
    from omegaconf import OmegaConf

    from harness.cli import CONF_DIR
    from harness.config import build

    return build(ModelSpec, OmegaConf.load(f"{CONF_DIR}/model/smollm2-135m.yaml"), "model")
