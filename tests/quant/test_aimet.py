"""The `aimet` quantizer: Qualcomm AIMET's flow (aimet-onnx) on a tiny Llama, read back as our per-linear grids.

The read-back is checked against what AIMET's HTP config defines independently of our code: a min-max weight grid is
the channel's largest magnitude over 2^(b-1) (AIMET's symmetric grid), and a linear's input range is the range of
the tensor it reads over the calibration tokens, which our own calibration statistics measure too."""
import pytest
import torch

from harness.quant import ConfigError, make_quantizer
from harness.quant.aimet_flow import unavailable_reason
from harness.quant.calibrate import collect_stats
from tests.tiny_llama import tiny_llama

pytestmark = pytest.mark.skipif(bool(unavailable_reason()), reason=unavailable_reason() or "")


@pytest.fixture(scope="module")
def model_and_calibration():
    model = tiny_llama()
    gen = torch.Generator().manual_seed(0)
    return model, [torch.randint(0, 256, (48,), generator=gen) for _ in range(3)]


@pytest.fixture(scope="module")
def minmax8(model_and_calibration):
    return _artifact(*model_and_calibration, weight_method="minmax")


def _artifact(model, calibration, **config):
    q = make_quantizer({"name": "aimet", "optimize_windows": 2, **config})
    q.calibrate(model, calibration)
    return q.quantize(model, "tiny")


@pytest.mark.parametrize("bits", [4, 8])
def test_minmax_weights_are_aimets_symmetric_per_channel_grid(model_and_calibration, bits):
    model, calibration = model_and_calibration
    art = _artifact(model, calibration, budget_bits=bits, weight_method="minmax")
    params = dict(model.named_parameters())
    assert len(art.linears) == 14  # 2 layers x q, k, v, o, gate, up, down
    for name, q in art.linears.items():
        w = params[f"{name}.weight"].detach()
        half = 1 << (bits - 1)
        # the smallest step that holds the channel: its minimum on -2^(b-1) or its maximum on 2^(b-1) - 1
        step = torch.maximum(-w.amin(1) / half, w.amax(1) / (half - 1))
        torch.testing.assert_close(q.w_scale, step, rtol=1e-5, atol=0)
        assert int(q.codes.min()) >= -half and int(q.codes.max()) <= half - 1 and (q.bits == bits).all()
        assert torch.equal(q.codes.float(), torch.round(w / q.w_scale[:, None]))  # nearest rounding, no clipping
    assert art.manifest["runtime_compatible"] is True
    assert art.manifest["quantizer"]["params"]["weight_method"] == "minmax"


def test_each_linear_takes_the_range_of_the_tensor_it_reads(model_and_calibration, minmax8):
    model, calibration = model_and_calibration
    art = minmax8
    stats = collect_stats(model, calibration)
    for name, q in art.linears.items():  # o_proj reads through a reshape, down_proj a product: both found
        peak = float(stats[name].in_max.max())
        # AIMET nudges its asymmetric range so that zero is a grid point: within one step of its 255
        assert float(q.act_scale) * 127 == pytest.approx(peak, abs=2 * peak / 255), name
        assert torch.equal(q.in_scale, torch.ones_like(q.in_scale))


def test_a16_and_the_weight_methods_give_a16_linears_or_new_codes(model_and_calibration, minmax8):
    model, calibration = model_and_calibration
    nearest = minmax8
    learned = _artifact(model, calibration, weight_method="adaround", adaround_iterations=20, act_bits=16)
    assert learned.manifest["runtime_compatible"] is True  # the runtime's lane computes A16W8 as HTP does
    assert learned.manifest["numerics"]["a16_linears"] == len(learned.linears)
    name = "model.layers.0.mlp.down_proj"
    assert learned.linears[name].act_bits == 16 and learned.linears[name].out_step is not None
    assert float(learned.linears[name].act_scale) * 32767 == pytest.approx(
        float(nearest.linears[name].act_scale) * 127, rel=2 / 255)  # the same range (up to A8's nudge), 16 bits
    flipped = sum(int((learned.linears[n].codes != nearest.linears[n].codes).sum()) for n in nearest.linears)
    assert flipped > 0  # AdaRound rounds some weights away from the nearest level


@pytest.mark.parametrize("bad, key", [({"budget_bits": 5}, "budget_bits"), ({"act_bits": 12}, "act_bits"),
                                      ({"weight_method": "gptq"}, "weight_method"), ({"npu": "sm9999"}, "npu"),
                                      ({"a16_budget": 0.5}, "a16_budget"), ({"optimize_windows": 0}, "optimize_windows"),
                                      ({"layer_budgets": {"*": 4}}, "layer_budgets")])
def test_bad_config_names_the_key(bad, key):
    with pytest.raises(ConfigError, match=f"quantizer.{key}"):
        make_quantizer({"name": "aimet", **bad})


@pytest.mark.real_model
def test_aimet_artifact_runs_through_htp_end_to_end(tmp_path, tiny_checkpoint):
    """Quantizer config -> cached artifact (the harness loads the model for AIMET) -> HTP fidelity rows."""
    from harness.npu.htp import unavailable_reason as htp_unavailable
    from harness.runner.job import run_job
    from harness.runner.store import ResultsStore
    from harness.runner.sweep import compose_config

    if htp_unavailable():
        pytest.skip(htp_unavailable())
    store = ResultsStore(tmp_path / "runs")
    cfg = compose_config(["experiment=fidelity", "npu=sm8750", "model.name=tiny-aimet-test",
                          f"model.path={tiny_checkpoint}", "model.source=hf", "quantizer=aimet",
                          "quantizer.weight_method=minmax",  # npu: A16W8 (conf/npu_recipe/aimet.yaml)
                          "experiment.extra.fidelity_windows=2", "experiment.extra.fidelity_window=64"])
    assert run_job(cfg, store) == "ok"
    fid = store.read("fidelity")
    htp = fid[fid.metric == "kl_fp16_htp"]
    assert len(htp) == 2 and (htp.label == "simulated").all() and (htp.quantizer == "aimet").all()
    fake = fid[fid.metric == "kl_fp16"]["value"].mean()
    assert 0 < htp["value"].mean() < 3 * fake  # HTP computes the same A16W8 model, plus its output requantization
    assert fid[fid.metric == "calibrate_s"]["value"].iloc[0] > 0  # AIMET's flow is the calibration cost


@pytest.mark.real_model
def test_a_model_too_large_for_the_host_is_refused_before_loading(monkeypatch, tiny_checkpoint):
    import harness.host
    from harness.models.zoo import ModelSpec
    from harness.quant.cache import quantized_artifact

    monkeypatch.setattr(harness.host, "mem_available", lambda: 1_000_000)  # 1 MB free
    spec = ModelSpec(name="tiny-aimet-too-large", source="hf", path=str(tiny_checkpoint))
    with pytest.raises(MemoryError, match="quantizer 'aimet' runs on the whole model in memory: about"):
        quantized_artifact(spec, {"name": "aimet", "weight_method": "minmax"})
