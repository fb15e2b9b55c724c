"""Mixed A8/A16 activations: the quantizer gives 16-bit activations to the linears that gain most, within a share
of the MACs; artifacts carry it with each linear's output grid at its width, the fake-quant model and the runtime
compute it."""
import pytest
import torch

from harness.artifact import ArtifactError, load_artifact, save_artifact
from harness.quant import ConfigError, make_quantizer
from harness.quant.a16 import a16_gain, as_a16, choose_a16
from harness.quant.fakequant import FakeQuantLinear


def quantized(model, calibration, **config):
    q = make_quantizer({"name": "edgeflow", "budget_bits": 6, "alpha_grid": [0.5], **config})
    q.calibrate(model, calibration)
    return q, q.quantize(model, "tiny")


def test_greedy_choice_takes_gain_per_mac_within_the_budget():
    gains = {"a": 4.0, "b": 3.0, "c": 0.5, "d": -1.0}
    macs = {"a": 400, "b": 100, "c": 100, "d": 100}  # per MAC: b 0.03, a 0.01, c 0.005
    assert choose_a16(gains, macs, 0.2) == {"b"}  # a would pass 20% of 700 MACs
    assert choose_a16(gains, macs, 0.72) == {"a", "b"}  # 500 of 504 MACs: c no longer fits
    assert choose_a16(gains, macs, 1.0) == {"a", "b", "c"}  # d never: A16 does not help it
    assert choose_a16(gains, macs, 0.0) == set()


def test_budget_bounds_the_a16_share_and_the_artifact_round_trips(model, calibration, tmp_path):
    _, art = quantized(model, calibration, a16_budget=0.3)
    a16 = {n for n, q in art.linears.items() if q.act_bits == 16}
    macs = {n: q.codes.numel() for n, q in art.linears.items()}
    assert a16 and sum(macs[n] for n in a16) <= 0.3 * sum(macs.values())
    assert art.manifest["runtime_compatible"] and art.manifest["numerics"]["a16_linears"] == len(a16)
    assert all(art.manifest["linears"][n]["act_bits"] == 16 for n in a16)
    for n in a16:  # the output grid at 16 bits: the same headroom over the same peaks, 258x finer than at 8
        q = art.linears[n]
        assert q.out_step is not None and float(q.out_step.max()) < float(q.act_scale) * 1e6
    back = load_artifact(save_artifact(art, tmp_path / "a16"))
    assert {n for n, q in back.linears.items() if q.act_bits == 16} == a16
    _, plain = quantized(model, calibration)
    assert plain.manifest["runtime_compatible"] and all(q.act_bits == 8 for q in plain.linears.values())
    assert not any(k.endswith(".act_bits") for k in plain.tensors())


def test_a16_lowers_output_error_and_widens_the_range(model, calibration):
    quantizer, art = quantized(model, calibration)
    name = "model.layers.0.mlp.down_proj"
    q, stats = art.linears[name], quantizer.stats[name]
    weight = model.get_submodule(name).weight.detach().float()
    assert a16_gain(q, weight, stats.rows, stats.out_max, quantizer.config) > 0
    wide = as_a16(q, 16.0)
    x = stats.rows * 8  # inputs well past the calibrated range: INT8 clips, A16 over 16x does not
    reference = x @ weight.t()
    err8 = float(((FakeQuantLinear(q)(x) - reference) ** 2).sum())
    err16 = float(((FakeQuantLinear(wide)(x) - reference) ** 2).sum())
    assert err16 < err8 / 4


def test_bad_a16_settings_and_artifacts_are_named(model, calibration):
    with pytest.raises(ConfigError, match="a16_budget"):
        make_quantizer({"name": "edgeflow", "a16_budget": 1.5})
    with pytest.raises(ConfigError, match="a16_range_gain"):
        make_quantizer({"name": "edgeflow", "a16_range_gain": 0.5})
    _, art = quantized(model, calibration)
    q = next(iter(art.linears.values()))
    q.act_bits = 12
    with pytest.raises(ArtifactError, match="act_bits must be one of"):
        q.validate("x")


def _search_errors(quantizer, model, name: str, act_bits: int) -> dict[float, float]:
    """alpha -> the linear's output error as the NPU computes it at `act_bits` (nearest rounding), brute force."""
    from harness.quant.a16 import at_width, npu_output_error

    c, stats = quantizer.config, quantizer.stats[name]
    weight = model.get_submodule(name).weight.detach().float()
    reference = stats.rows @ weight.t()
    return {alpha: npu_output_error(at_width(quantizer.candidate(weight, stats, alpha, c.budget_bits).linear, act_bits,
                                             c), stats.rows, reference, stats.out_max, c.output_grid, c.output_headroom)
            for alpha in c.alpha_grid}


def test_npu_alpha_search_picks_each_linears_smoothing_for_the_width_it_gets(model, calibration):
    """alpha_search=npu: every linear's alpha is the one with the least output error under the numerics it runs with
    (its input width and its output grid), written in the manifest with its width; the paper's search (float
    outputs at 8 bits) picks differently on some linear, which is why the option exists."""
    grid = {"alpha_grid": [0.0, 0.5, 1.0], "a16_budget": 0.5}
    npu_q, npu = quantized(model, calibration, alpha_search="npu", **grid)
    paper_q, paper = quantized(model, calibration, **grid)
    assert npu_q.chooses_per_width and not paper_q.chooses_per_width
    entries = npu.manifest["linears"]
    assert {e["act_bits"] for e in entries.values()} == {8, 16}  # both widths taken, each linear's written down
    differs = 0
    for name, entry in entries.items():
        errors = _search_errors(npu_q, model, name, entry["act_bits"])
        assert entry["alpha"] == min(errors, key=errors.get), name
        differs += entry["alpha"] != paper.manifest["linears"][name]["alpha"]
    assert differs > 0
    assert npu.manifest["quantizer"]["params"]["alpha_search"] == "npu"


def test_npu_search_gains_compare_each_widths_own_choice(model, calibration):
    """The A16 chooser's gain for a linear is its error quantized for A8 minus its error quantized for A16 (each with
    its own alpha), never less than with one candidate widened."""
    quantizer, _ = quantized(model, calibration, alpha_search="npu", alpha_grid=[0.0, 0.5, 1.0])
    name = "model.layers.0.self_attn.o_proj"
    e8, e16 = (_search_errors(quantizer, model, name, bits) for bits in (8, 16))
    stats, weight = quantizer.stats[name], model.get_submodule(name).weight.detach().float()
    c = quantizer.config
    q8 = quantizer.quantize_at_width(name, weight, stats, c.budget_bits, 8).linear
    q16 = quantizer.quantize_at_width(name, weight, stats, c.budget_bits, 16).linear
    gain = a16_gain(q8, weight, stats.rows, stats.out_max, c, q16=q16)
    assert gain == pytest.approx(min(e8.values()) - min(e16.values()), rel=1e-5)
    one = a16_gain(q8, weight, stats.rows, stats.out_max, c)
    assert gain >= one - 1e-12


def test_a_bad_alpha_search_is_named():
    with pytest.raises(ConfigError, match="alpha_search"):
        make_quantizer({"name": "edgeflow", "alpha_search": "htp"})


def test_a8_range_gain_widens_the_8_bit_input_grids_only(model, calibration):
    """a8_range_gain: every A8 linear's static input grid spans that many times its calibrated range (so text unlike
    the calibration corpus clips less); the A16 linears' grids are a16_range_gain's as before."""
    grid = {"a16_budget": 0.5, "a16_range_gain": 1.0}
    _, plain = quantized(model, calibration, **grid)
    _, wide = quantized(model, calibration, a8_range_gain=2.0, **grid)
    for name, q in wide.linears.items():
        assert q.act_bits == plain.linears[name].act_bits, name
        factor = 2.0 if q.act_bits == 8 else 1.0
        assert float(q.act_scale) == pytest.approx(factor * float(plain.linears[name].act_scale), rel=1e-6), name
    with pytest.raises(ConfigError, match="a8_range_gain"):
        make_quantizer({"name": "edgeflow", "a8_range_gain": 0.5})


@pytest.mark.parametrize("soc", ["sm8750", "sm8650", "sm8550"])
def test_npu_alone_selects_the_quantizer_made_for_its_numerics(model, calibration, soc):
    """`quantizer=edgeflow npu=<soc>` with no other override gives the NPU-aware artifact (conf/npu_recipe/): each
    linear's width, its smoothing searched under HTP's numerics, its output grid and GPTQ rounding, all in the
    manifest; the command line wins over the recipe, `+npu.quantizer_recipe=false` and no `npu` give the paper's
    recipe, AIMET takes 16-bit activations (Qualcomm's recipe for LLMs on HTP), and quantizers without a recipe are
    left as they are."""
    from omegaconf import OmegaConf

    from harness.runner.job import prepare_job
    from harness.runner.sweep import compose_config

    def params(*overrides):
        return OmegaConf.to_container(prepare_job(compose_config(["experiment=fidelity", *overrides])).cfg.quantizer)

    paper, aimet, cmpq = params("quantizer=edgeflow"), params("quantizer=aimet"), params("quantizer=cmpq")
    assert "alpha_search" not in paper and "a16_budget" not in paper  # the dataclass defaults: float outputs, all A8
    assert "act_bits" not in aimet and params("quantizer=aimet", f"npu={soc}") == aimet | {"act_bits": 16}
    assert params("quantizer=aimet", f"npu={soc}", "+quantizer.act_bits=8")["act_bits"] == 8
    assert params("quantizer=cmpq", f"npu={soc}") == cmpq
    assert params("quantizer=edgeflow", f"npu={soc}", "+npu.quantizer_recipe=false") == paper
    recipe = params("quantizer=edgeflow", f"npu={soc}")
    assert {k: recipe[k] for k in ("alpha_search", "weight_rounding")} == {"alpha_search": "npu",
                                                                          "weight_rounding": "gptq"}
    assert 0 < recipe["a16_budget"] < 1 and recipe["a8_range_gain"] > 1
    assert {k: v for k, v in recipe.items() if k in paper} == paper  # added to the quantizer's YAML, none changed
    assert params("quantizer=edgeflow", f"npu={soc}", "+quantizer.a16_budget=1.0") == recipe | {"a16_budget": 1.0}
    for bits in (7, 7.5, 8):  # the recipe's from_budget_bits: A16 everywhere from 7 bits up, wider grids at 8
        assert params("quantizer=edgeflow", f"npu={soc}", f"quantizer.budget_bits={bits}") == recipe | {
            "budget_bits": bits, "a16_budget": 1.0} | ({"a16_range_gain": 2.0} if bits == 8 else {})
    assert params("quantizer=edgeflow", f"npu={soc}", "quantizer.budget_bits=6.9")["a16_budget"] == 0.5
    if soc != "sm8750":
        return  # the same recipe for every SoC: quantize once
    q, artifact = quantized(model, calibration, **recipe)
    written = artifact.manifest["quantizer"]["params"]
    assert {k: written[k] for k in recipe} == recipe
    entries = artifact.manifest["linears"]
    assert {e["act_bits"] for e in entries.values()} == {8, 16}
    assert all(e["alpha"] in recipe["alpha_grid"] for e in entries.values())
    assert all(linear.out_step is not None for linear in artifact.linears.values())  # an output grid each


def test_the_a16_pass_hands_each_linear_to_the_main_pass_quantized_once_per_winning_alpha(model, calibration,
                                                                                          monkeypatch):
    """With the widths chosen per linear (alpha_search=npu) and GPTQ rounding, the A16 pass builds each linear's grid
    candidates once for both widths and rounds each winning alpha by GPTQ once; the main pass quantizes nothing
    again (before: every linear searched and rounded three times). What it writes is what quantizing each linear
    alone at the width it got gives."""
    import harness.quant.pipeline as pipeline
    from harness.quant.a16 import at_width
    from harness.quant.outputs import with_output_grid

    rounded = []
    real = pipeline.gptq_codes
    monkeypatch.setattr(pipeline, "gptq_codes", lambda *a, **k: rounded.append(1) or real(*a, **k))
    quantizer, art = quantized(model, calibration, alpha_search="npu", alpha_grid=[0.0, 0.5, 1.0], a16_budget=0.5,
                               weight_rounding="gptq")
    entries = art.manifest["linears"]
    assert {e["act_bits"] for e in entries.values()} == {8, 16}
    assert len(entries) <= len(rounded) <= 2 * len(entries)
    monkeypatch.setattr(pipeline, "gptq_codes", real)
    c = quantizer.config
    for name, q in art.linears.items():
        stats, width = quantizer.stats[name], entries[name]["act_bits"]
        weight = model.get_submodule(name).weight.detach().float()
        alone = quantizer.quantize_at_width(name, weight, stats, c.budget_bits, width)
        alone = with_output_grid(at_width(alone.linear, width, c), stats.out_max, c.output_grid, c.output_headroom)
        assert torch.equal(q.codes, alone.codes) and torch.equal(q.act_scale, alone.act_scale), name
        assert torch.equal(q.out_step, alone.out_step), name
