import pytest
import torch

from harness.artifact import load_artifact, save_artifact
from harness.quant import make_quantizer
from harness.quant.fakequant import FakeQuantLinear, build_fakequant_model


def artifact_for(model, calibration, **config):
    q = make_quantizer(config)
    q.calibrate(model, calibration)
    return q.quantize(model, "tiny")


def runtime_reference(x, q, float_outputs=False):
    """What the runtime does, in integer arithmetic: activation codes at the linear's width, int64 sums, then either
    one float rescale (float outputs) or the output codes on its grid (half to even, clamped) times their step."""
    qmax = (1 << (q.act_bits - 1)) - 1
    m = q.in_scale / q.act_scale
    xq = torch.clamp(torch.round(x * m), -qmax, qmax).to(torch.int64)
    acc = xq @ q.codes.to(torch.int64).t()
    if float_outputs or q.out_step is None:
        return acc.float() * (q.act_scale * q.w_scale)
    ratio = q.act_scale.double() * q.w_scale.double() / q.out_step.double()
    codes = torch.clamp(torch.round(acc.double() * ratio), -qmax - 1, qmax)
    return codes.float() * q.out_step


@pytest.mark.parametrize("int8_matmul", ["0", "1"])  # float32 sums, or torch._int_mm's int32 ones
def test_fake_quant_linear_equals_integer_arithmetic(model, calibration, int8_matmul, monkeypatch):
    monkeypatch.setenv("EDGEFLOW_INT8_MATMUL", int8_matmul)
    art = artifact_for(model, calibration, name="edgeflow", budget_bits=4.5, alpha_grid=[0.5])
    for name in ("model.layers.0.self_attn.k_proj", "model.layers.1.mlp.down_proj"):
        q = art.linears[name]
        assert q.out_step is not None and q.out_step.shape == (q.codes.shape[0],)  # the NPU's grid, by default
        xin = torch.randn(7, q.codes.shape[1]) * 3
        assert torch.equal(FakeQuantLinear(q)(xin), runtime_reference(xin, q))
        assert torch.equal(FakeQuantLinear(q, numerics="cpu-float")(xin), runtime_reference(xin, q, True))
        codes = FakeQuantLinear(q)(xin) / q.out_step  # requantized: whole codes on the 8-bit grid
        assert torch.equal(codes.round(), codes.round().clamp(-128, 127))
        assert torch.allclose(codes, codes.round(), atol=1e-3)


def test_a16_outputs_are_exact_past_float32s_integers(model, calibration):
    """A16 sums pass 2^24 (float32 would round them): the fake-quant model sums in float64 and requantizes exactly."""
    from dataclasses import replace

    from harness.quant.a16 import as_a16
    art = artifact_for(model, calibration, name="edgeflow", budget_bits=6, alpha_grid=[0.5])
    q = art.linears["model.layers.1.mlp.down_proj"]
    wide = replace(as_a16(q, 1.0), out_step=q.out_step * 127 / 32767)  # the same range at 16-bit resolution
    xin = torch.randn(9, q.codes.shape[1]) * 50  # many inputs at the clamp: sums near the bound
    assert torch.equal(FakeQuantLinear(wide)(xin), runtime_reference(xin, wide))


def test_output_grid_none_gives_float_outputs(model, calibration):
    art = artifact_for(model, calibration, name="edgeflow", budget_bits=5, alpha_grid=[0.5], output_grid="none")
    assert all(q.out_step is None for q in art.linears.values())
    assert art.manifest["numerics"]["outputs"] == "float"
    q = art.linears["model.layers.0.self_attn.q_proj"]
    xin = torch.randn(5, q.codes.shape[1])
    assert torch.equal(FakeQuantLinear(q)(xin), runtime_reference(xin, q, True))


def test_per_tensor_output_grid_has_one_step_per_linear(model, calibration):
    art = artifact_for(model, calibration, name="edgeflow", budget_bits=5, alpha_grid=[0.5], output_grid="tensor",
                       output_headroom=2.0)
    for q in art.linears.values():
        assert torch.equal(q.out_step, q.out_step[:1].expand_as(q.out_step))
    assert art.manifest["numerics"] == {"outputs": "requantized", "output_grid": "tensor", "output_headroom": 2.0,
                                        "a16_linears": 0, "linears": len(art.linears)}


def test_int8_fake_quant_model_tracks_the_fp_model(model, calibration):
    art = artifact_for(model, calibration, name="uniform", budget_bits=8)
    fq = build_fakequant_model(art, model)
    ids = torch.randint(0, 256, (1, 48), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        ref, got = model(ids).logits, fq(ids).logits
    assert (ref.argmax(-1) == got.argmax(-1)).float().mean() > 0.8  # random tiny logits are nearly flat
    err8 = float((got - ref).norm() / ref.norm())
    assert err8 < 0.1  # per-tensor INT8 activations of a model with three large norm channels
    with torch.no_grad():
        got4 = build_fakequant_model(artifact_for(model, calibration, name="uniform", budget_bits=4), model)(ids).logits
    assert float((got4 - ref).norm() / ref.norm()) > 2 * err8  # and fewer weight bits cost accuracy
    assert not any(isinstance(m, FakeQuantLinear) for m in model.modules())  # the FP model is untouched


def test_model_from_saved_artifact_equals_in_memory(model, calibration, tmp_path):
    art = artifact_for(model, calibration, name="shadow_outlier", budget_bits=6, outlier_threshold=1.0,
                       max_outlier_fraction=0.05)
    back = load_artifact(save_artifact(art, tmp_path / "a"))
    ids = torch.arange(20)[None]
    with torch.no_grad():
        a, b = build_fakequant_model(art, model)(ids).logits, build_fakequant_model(back, model)(ids).logits
    assert torch.equal(a, b)
    fq = build_fakequant_model(back, model)
    layer = fq.get_submodule("model.layers.0.self_attn.q_proj")
    assert layer.outlier_idx is not None and layer.outlier_idx.numel() > 0


def test_rows_can_say_which_numerics_an_artifact_computes(model, calibration):
    from harness.quant.outputs import numerics_text

    npu = artifact_for(model, calibration, name="edgeflow", budget_bits=5, alpha_grid=[0.5], a16_budget=0.5)
    wide = npu.manifest["numerics"]["a16_linears"]
    assert 0 < wide < len(npu.linears)
    assert numerics_text(npu.manifest) == (f"NPU numerics: A8 (A16 on {wide} of {len(npu.linears)} linears), "
                                           "outputs requantized to static grids per output channel at 4x the "
                                           "calibrated peak")
    plain = artifact_for(model, calibration, name="edgeflow", budget_bits=5, alpha_grid=[0.5], output_grid="none")
    assert numerics_text(plain.manifest) == "float outputs (CPU only: no NPU computes them)"
    assert numerics_text({}) == numerics_text(plain.manifest)  # an artifact made before grids existed
