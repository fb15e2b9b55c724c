"""GPTQ rounding (weight_rounding=gptq): the same grids as nearest rounding, codes that lower the output error on
correlated inputs, nearest rounding again where inputs are uncorrelated; artifacts the runtime runs unchanged."""
import pytest
import torch

from harness.quant import ConfigError, make_quantizer
from harness.quant.gptq import gptq_codes
from harness.quant.numerics import code_range, quantize_per_channel


def _correlated_inputs(tokens=2048, dim=96, seed=0):
    """X [T, D] whose features share a few latent factors (as a layer's inputs do), with per-feature scales."""
    gen = torch.Generator().manual_seed(seed)
    latent = torch.randn(tokens, 8, generator=gen)
    mix = torch.randn(8, dim, generator=gen)
    x = latent @ mix + 0.3 * torch.randn(tokens, dim, generator=gen)
    return x * torch.linspace(0.2, 3.0, dim)


def _weight(rows=48, dim=96, seed=1):
    return torch.randn(rows, dim, generator=torch.Generator().manual_seed(seed))


def _output_error(x, w, codes, scale):
    return float(((x @ (w - codes.float() * scale[:, None]).t()) ** 2).sum())


@pytest.mark.parametrize("bits", [3, 4, 8])
def test_gptq_lowers_the_output_error_on_the_same_grid(bits):
    x, w = _correlated_inputs(), _weight()
    b = torch.full((w.shape[0],), bits)
    nearest, scale = quantize_per_channel(w, b)
    codes = gptq_codes(w, b, scale, x.t() @ x / x.shape[0])
    lo, hi = code_range(b)
    assert codes.dtype == torch.int8 and codes.shape == w.shape
    assert bool(((codes >= lo[:, None]) & (codes <= hi[:, None])).all())
    assert _output_error(x, w, codes, scale) < 0.7 * _output_error(x, w, nearest, scale)


def test_damping_trades_the_fit_to_calibration_for_nearest_rounding():
    x, w = _correlated_inputs(), _weight()
    b = torch.full((w.shape[0],), 4)
    nearest, scale = quantize_per_channel(w, b)
    gram = x.t() @ x / x.shape[0]
    changed = [int((gptq_codes(w, b, scale, gram, damp) != nearest).sum()) for damp in (0.01, 1.0, 100.0)]
    errors = [_output_error(x, w, gptq_codes(w, b, scale, gram, damp), scale) for damp in (0.01, 1.0, 100.0)]
    assert changed[0] > changed[1] > changed[2] and errors[0] < errors[1] < errors[2]


def test_mixed_bit_widths_keep_each_row_on_its_own_grid():
    x, w = _correlated_inputs(), _weight()
    b = torch.arange(w.shape[0]) % 8 + 1  # 1..8 bits, as EdgeFlow's allocation gives
    _, scale = quantize_per_channel(w, b)
    codes = gptq_codes(w, b, scale, x.t() @ x)
    lo, hi = code_range(b)
    assert bool(((codes >= lo[:, None]) & (codes <= hi[:, None])).all())


def test_uncorrelated_inputs_give_nearest_rounding():
    w = _weight()
    b = torch.full((w.shape[0],), 5)
    nearest, scale = quantize_per_channel(w, b)
    diagonal = torch.diag(torch.linspace(0.5, 2.0, w.shape[1]))  # no error has anywhere to go
    assert torch.equal(gptq_codes(w, b, scale, diagonal), nearest)


def test_dead_input_channels_get_zero_codes():
    x, w = _correlated_inputs(), _weight()
    x[:, 7] = 0.0
    b = torch.full((w.shape[0],), 6)
    _, scale = quantize_per_channel(w, b)
    codes = gptq_codes(w, b, scale, x.t() @ x)
    assert not codes[:, 7].any()


def test_a_gram_of_the_wrong_size_is_refused():
    w = _weight()
    b = torch.full((w.shape[0],), 4)
    _, scale = quantize_per_channel(w, b)
    with pytest.raises(ValueError, match="input channels"):
        gptq_codes(w, b, scale, torch.eye(5))


def test_config_names_the_rounding_and_the_methods_that_have_it():
    with pytest.raises(ConfigError, match="weight_rounding"):
        make_quantizer({"name": "edgeflow", "weight_rounding": "adaround"})
    with pytest.raises(ConfigError, match="gptq_damp"):
        make_quantizer({"name": "edgeflow", "weight_rounding": "gptq", "gptq_damp": 0})
    with pytest.raises(ConfigError, match="quantizer.output_grid must be channel or tensor or none"):
        make_quantizer({"name": "edgeflow", "output_grid": "row"})
    with pytest.raises(ConfigError, match="quantizer.output_headroom"):
        make_quantizer({"name": "edgeflow", "output_headroom": 0.5})
    with pytest.raises(ConfigError, match="rtn_clip.*nearest"):
        make_quantizer({"name": "rtn_clip", "weight_rounding": "gptq"})


def test_gptq_artifact_runs_on_the_runtime_grids_and_fits_calibration_better(model, calibration):
    def quantized(rounding):
        q = make_quantizer({"name": "edgeflow", "budget_bits": 4, "alpha_grid": [0.5], "weight_rounding": rounding})
        q.calibrate(model, calibration)
        return q, q.quantize(model, "tiny")

    plain_q, plain = quantized("nearest")
    gptq_q, gptq = quantized("gptq")
    assert plain_q.stats[next(iter(plain_q.stats))].gram is None  # not collected unless asked for
    assert gptq.manifest["runtime_compatible"] and gptq.manifest["quantizer"]["params"]["weight_rounding"] == "gptq"
    changed = 0
    for name, q in gptq.linears.items():
        ref = plain.linears[name]
        assert torch.equal(q.bits, ref.bits) and torch.equal(q.w_scale, ref.w_scale)  # same grids, same bytes
        stats = gptq_q.stats[name]
        weight = dict(model.named_parameters())[f"{name}.weight"].detach()

        def err(art_q):
            w = art_q.codes.float() * art_q.w_scale[:, None] * art_q.in_scale[None, :]  # dequantised [C, D]
            return float(torch.einsum("cd,de,ce->", weight - w, stats.gram, weight - w))
        assert err(q) <= err(ref) * 1.0001, name
        changed += int(not torch.equal(q.codes, ref.codes))
    assert gptq.manifest["effective_bits_per_weight"] == plain.manifest["effective_bits_per_weight"]
    assert changed > len(gptq.linears) // 2


def test_gptq_without_gram_statistics_says_what_is_missing(model, calibration):
    q = make_quantizer({"name": "edgeflow", "budget_bits": 4, "alpha_grid": [0.5]})
    q.calibrate(model, calibration)
    gptq = make_quantizer({"name": "edgeflow", "budget_bits": 4, "alpha_grid": [0.5], "weight_rounding": "gptq"})
    gptq.stats = q.stats
    with pytest.raises(ValueError, match="Gram"):
        gptq.quantize(model, "tiny")
