import pytest
import torch

from harness.quant.metric import relative_error_closed, relative_error_exact
from harness.quant.numerics import (act_scale_for, code_range, integer_matmul, quantize_activations,
                                    quantize_per_channel, quantize_per_tensor)


@pytest.mark.parametrize("bits", range(1, 9))
def test_codes_lie_in_the_bit_width_and_the_peak_is_exact(bits):
    w = torch.randn(16, 40)
    codes, scale = quantize_per_channel(w, torch.full((16,), bits))
    lo, hi = code_range(torch.tensor(bits))
    assert codes.dtype == torch.int8 and int(codes.min()) >= lo and int(codes.max()) <= hi
    deq = codes.float() * scale[:, None]
    peak_idx = w.abs().argmax(1)
    assert torch.allclose(deq.gather(1, peak_idx[:, None]), w.gather(1, peak_idx[:, None]), rtol=1e-6)
    if bits >= 2:  # everywhere else the error is at most one step (the far side loses one level)
        step = w.abs().amax(1) / 2 ** (bits - 1)
        assert bool(((deq - w).abs() <= step[:, None] * 1.0001).all())


def test_one_bit_holds_the_peak_or_zero():
    w = torch.tensor([[0.1, -0.9, 0.5, -0.3, 0.0]])
    codes, scale = quantize_per_channel(w, torch.tensor([1]))
    assert set(codes.flatten().tolist()) <= {-1, 0}
    assert (codes.float() * scale[:, None]).flatten().tolist() == pytest.approx([0.0, -0.9, 0.0, 0.0, 0.0])


def test_zero_rows_and_per_tensor_grid():
    w = torch.randn(4, 8)
    w[2] = 0
    codes, scale = quantize_per_channel(w, torch.full((4,), 5))
    assert bool((codes[2] == 0).all()) and torch.isfinite(scale).all()
    codes, scale = quantize_per_tensor(w, 4)
    assert bool((scale == scale[0]).all())
    assert float((codes.float() * scale[:, None] - w).abs().max()) <= float(w.abs().max()) / 8 * 1.0001


def test_activation_quantization_rounds_half_to_even_and_clamps():
    in_scale = torch.ones(4)
    act = torch.tensor(1.0)
    x = torch.tensor([0.5, 1.5, 2.5, -300.0])
    assert quantize_activations(x, in_scale, act).tolist() == [0.0, 2.0, 2.0, -127.0]
    assert float(act_scale_for(torch.tensor([1.0, 254.0]), torch.tensor([1.0, 0.5]))) == pytest.approx(1.0)


def test_closed_form_tracks_the_exact_cosine_distance():
    """Appendix A's approximation: within a factor ~2 of the exact metric for Gaussian weights at 3..8 bits."""
    w = torch.randn(64, 256)
    closed, exact = relative_error_closed(w), relative_error_exact(w)
    ratio = (closed[:, 2:] / exact[:, 2:]).median(dim=0).values
    assert bool(((ratio > 0.5) & (ratio < 2.0)).all()), ratio
    assert bool((exact[:, :-1] >= exact[:, 1:] - 1e-9).all())  # more bits, less error (for these channels)


@pytest.mark.parametrize("bits", range(1, 9))
def test_every_grid_has_an_htp_form_with_positive_scales(bits):
    """HTP needs positive weight scales: negating a negative-scale channel's codes must stay within INT8."""
    w = torch.randn(64, 32)
    w[0, 0], w[1, 0] = 10.0, -10.0  # one positive and one negative peak
    codes, scale = quantize_per_channel(w, torch.full((64,), bits))
    flipped = torch.where(scale[:, None] < 0, -codes.to(torch.int32), codes.to(torch.int32))
    assert int(flipped.min()) >= -128 and int(flipped.max()) <= 127
    assert torch.allclose(flipped.float() * scale.abs()[:, None], codes.float() * scale[:, None])


def test_integer_matmul_sums_exactly_where_float32_rounds(monkeypatch):
    """Past 2^24 a float32 sum of int8 products drops its last bits; the int8 path keeps the runtime's int32 sum.
    Below it both paths give the same numbers; A16 activations (beyond int8) always take the float path."""
    gen = torch.Generator().manual_seed(3)
    codes = torch.randint(-127, 128, (5, 4096), generator=gen, dtype=torch.int8)
    codes[0] = 127  # row 0: 127 * 127 * 4096 = 66,064,384 > 2^24
    xq = torch.randint(-127, 128, (3, 4096), generator=gen).float()
    xq[0] = 127
    exact = (xq.to(torch.int64) @ codes.to(torch.int64).t()).float()
    monkeypatch.setenv("EDGEFLOW_INT8_MATMUL", "1")
    assert torch.equal(integer_matmul(xq, codes), exact)
    assert integer_matmul(xq[None], codes).shape == (1, 3, 5)  # leading dimensions kept
    wide = xq * 200  # A16 codes: the float path, whatever the CPU
    assert torch.allclose(integer_matmul(wide, codes, xq_fits_int8=False), wide @ codes.float().t())
    monkeypatch.setenv("EDGEFLOW_INT8_MATMUL", "0")
    small = xq[1:, :512] @ codes[1:, :512].float().t()  # sums below 2^24: float32 is exact too
    assert torch.equal(integer_matmul(xq[1:, :512], codes[1:, :512]), small)
