"""The fake-quant model's activation variants that locate a quantizer's error: static (the runtime's numerics),
per-token dynamic scales, and float activations (weights only)."""
import pytest
import torch

from harness.artifact import QuantLinear
from harness.quant.fakequant import quant_linear_forward


@pytest.fixture
def layer():
    g = torch.Generator().manual_seed(0)
    codes = torch.randint(-8, 8, (6, 32), generator=g, dtype=torch.int8)
    return QuantLinear(codes, torch.full((6,), 4, dtype=torch.uint8), torch.rand(6, generator=g) + 0.5,
                       torch.rand(32, generator=g) + 0.5, torch.tensor(0.05))


def test_float_activations_are_the_weight_only_product(layer):
    x = torch.randn(3, 32)
    want = ((x * layer.in_scale) @ layer.codes.float().t()) * layer.w_scale
    assert torch.allclose(quant_linear_forward(x, layer, activations="float"), want)


def test_dynamic_scales_follow_each_token_and_static_ones_do_not(layer):
    x = torch.randn(2, 32)
    tiny = x * 1e-3  # far below the static act_scale's range: static rounds it all to zero, dynamic keeps it
    dyn, stat = (quant_linear_forward(tiny, layer, activations=a) for a in ("dynamic", "static"))
    assert torch.allclose(dyn * 1e3, quant_linear_forward(x, layer, activations="dynamic"), rtol=1e-4, atol=1e-4)
    assert torch.count_nonzero(stat) == 0 and torch.count_nonzero(dyn) > 0
    exact = quant_linear_forward(x, layer, activations="float")
    assert (quant_linear_forward(x, layer, activations="dynamic") - exact).abs().max() < 0.05 * exact.abs().max()
