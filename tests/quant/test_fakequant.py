import pytest
import torch

from harness.artifact import load_artifact, save_artifact
from harness.quant import make_quantizer
from harness.quant.fakequant import FakeQuantLinear, build_fakequant_model


def artifact_for(model, calibration, **config):
    q = make_quantizer(config)
    q.calibrate(model, calibration)
    return q.quantize(model, "tiny")


def runtime_reference(x, q):
    """What the runtime does, in integer arithmetic: int8 activations, int64 accumulation, one float rescale."""
    m = q.in_scale / q.act_scale
    xq = torch.clamp(torch.round(x * m), -127, 127).to(torch.int64)
    acc = xq @ q.codes.to(torch.int64).t()
    return acc.float() * (q.act_scale * q.w_scale)


@pytest.mark.parametrize("int8_matmul", ["0", "1"])  # float32 sums, or torch._int_mm's int32 ones
def test_fake_quant_linear_equals_integer_arithmetic(model, calibration, int8_matmul, monkeypatch):
    monkeypatch.setenv("EDGEFLOW_INT8_MATMUL", int8_matmul)
    art = artifact_for(model, calibration, name="edgeflow", budget_bits=4.5, alpha_grid=[0.5])
    for name in ("model.layers.0.self_attn.k_proj", "model.layers.1.mlp.down_proj"):
        q = art.linears[name]
        xin = torch.randn(7, q.codes.shape[1]) * 3
        assert torch.equal(FakeQuantLinear(q)(xin), runtime_reference(xin, q))


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
