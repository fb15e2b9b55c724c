"""A toy quantizer added the way docs/adding-a-quantizer.md describes: one class, one registration, one YAML."""
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
import yaml

from harness.artifact import QuantLinear, load_artifact, save_artifact
from harness.quant import REGISTRY, ConfigError, LayerResult, Quantizer, QuantizerConfig, make_quantizer, register
from harness.quant.numerics import act_scale_for, quantize_per_channel

CONF = Path(__file__).resolve().parents[2] / "conf" / "quantizer"


@dataclass
class RoundToNearestConfig(QuantizerConfig):
    name: str = "toy_rtn"
    clip_ratio: float = 1.0  # an option of this quantizer only


class RoundToNearest(Quantizer):
    """Uniform bits, no smoothing, per-channel grids clipped at clip_ratio * max|W|."""

    name = "toy_rtn"
    Config = RoundToNearestConfig

    def quantize_linear(self, name, weight, stats, budget):
        bits = torch.full((weight.shape[0],), int(budget))
        peak = weight.abs().amax(1, keepdim=True) * self.config.clip_ratio
        codes, scale = quantize_per_channel(torch.clamp(weight, -peak, peak), bits)
        ones = torch.ones(weight.shape[1])
        return LayerResult(QuantLinear(codes, bits.to(torch.uint8), scale, ones, act_scale_for(stats.in_max, ones)))


@pytest.fixture
def toy():
    register(RoundToNearest)
    yield
    REGISTRY.pop("toy_rtn")


def test_toy_quantizer_through_the_registry(toy, model, calibration, tmp_path):
    yaml_text = "name: toy_rtn\nbudget_bits: 6\nclip_ratio: 0.9\n"  # what conf/quantizer/toy_rtn.yaml would hold
    q = make_quantizer(yaml.safe_load(yaml_text))
    assert isinstance(q, RoundToNearest) and q.config.clip_ratio == 0.9
    q.calibrate(model, calibration)
    art = load_artifact(save_artifact(q.quantize(model, "tiny"), tmp_path / "toy"))
    assert art.manifest["quantizer"] == {"name": "toy_rtn", "params": q.config.params()}
    assert all(int(l.bits[0]) == 6 for l in art.linears.values())
    assert art.manifest["runtime_compatible"] is True
    with pytest.raises(ConfigError, match="clip_ratios"):
        make_quantizer({"name": "toy_rtn", "clip_ratios": 1})


def test_registering_a_taken_name_is_an_error(toy):
    class Impostor(RoundToNearest):
        pass

    with pytest.raises(ValueError, match="already registered"):
        register(Impostor)


@pytest.mark.parametrize("path", sorted(CONF.glob("*.yaml")), ids=lambda p: p.stem)
def test_every_shipped_yaml_is_valid(path):
    q = make_quantizer(yaml.safe_load(path.read_text()))
    assert q.name == yaml.safe_load(path.read_text())["name"]
