import pytest
import torch

from harness.artifact import load_artifact, save_artifact
from harness.quant import REGISTRY, ConfigError, make_quantizer
from harness.quant.fakequant import OUTLIER_IDX, build_fakequant_model
from tests.tiny_llama import tiny_llama

BUILTIN = {"edgeflow": 4.5, "uniform": 4, "cmpq": 4.5, "smoothquant": 5, "shadow_outlier": 6}


def quantized(model, calibration, **config):
    q = make_quantizer(config)
    q.calibrate(model, calibration)
    return q.quantize(model, "tiny")


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_every_builtin_writes_a_valid_artifact(name, model, calibration, tmp_path):
    art = quantized(model, calibration, name=name, budget_bits=BUILTIN[name], alpha_grid=[0.0, 0.5])
    path = save_artifact(art, tmp_path / name)  # validates every layer against the contract
    back = load_artifact(path)
    assert set(back.linears) == {n for n, m in model.named_modules() if n.endswith("_proj")}
    assert back.manifest["quantizer"]["name"] == name
    assert back.manifest["model"]["config"]["num_key_value_heads"] == 2
    for layer, q in back.linears.items():
        assert q.act_scale is not None
        assert back.manifest["linears"][layer]["mean_bits"] == pytest.approx(
            int(q.bits.to(torch.int64).sum()) / q.bits.numel())
        assert int(q.bits.to(torch.int64).sum()) == int(q.bits.numel() * BUILTIN[name])
    eff = back.manifest["effective_bits_per_weight"]
    assert BUILTIN[name] < eff < BUILTIN[name] + (5 if name == "shadow_outlier" else 2)  # tiny D: large overhead
    assert back.manifest["runtime_compatible"] == (name != "shadow_outlier")
    for table in ("model.embed_tokens", "lm_head"):  # untied: both per-row INT8
        assert back.others[f"{table}.codes"].dtype == torch.int8
    assert "model.norm.weight" in back.others


def test_shadow_outlier_keeps_outlier_channels_in_float(model, calibration):
    art = quantized(model, calibration, name="shadow_outlier", budget_bits=8, max_outlier_fraction=0.05,
                    outlier_threshold=1.0)
    assert "shadow outliers" in art.manifest["runtime_incompatible_reason"]
    q = art.linears["model.layers.0.self_attn.q_proj"]
    idx = art.others[f"model.layers.0.self_attn.q_proj.{OUTLIER_IDX}"]
    assert 0 < idx.numel() <= 3 and bool((q.in_scale[idx] == 0).all())


def test_edgeflow_mixes_bit_widths_where_channels_differ(model, calibration):
    with torch.no_grad():  # half the channels spiky (large max/rms), half flat: their RE differs by far more than 4x
        w = model.model.layers[0].mlp.down_proj.weight
        w[:32] = torch.randn(32, w.shape[1]) * 0.02
        w[32:, :1] = 1.0
    ef = quantized(model, calibration, name="edgeflow", budget_bits=4, alpha_grid=[0.0])
    bits = ef.linears["model.layers.0.mlp.down_proj"].bits.to(torch.int64)
    assert float(bits[32:].float().mean()) > float(bits[:32].float().mean()) + 1  # spiky channels get more bits
    assert int(bits.sum()) == 4 * bits.numel()


def test_alpha_search_keeps_the_candidate_with_least_output_error(model, calibration):
    from harness.quant.pipeline import output_of

    q = make_quantizer({"name": "edgeflow", "budget_bits": 4, "alpha_grid": [0.0, 0.5, 1.0]})
    q.calibrate(model, calibration)
    name = "model.layers.0.self_attn.q_proj"
    w, stats = model.get_submodule(name).weight.detach(), q.stats[name]
    ref = stats.rows @ w.t()
    errs = {a: float(((output_of(q.candidate(w, stats, a, 4.0), stats.rows) - ref) ** 2).sum()) for a in (0, .5, 1)}
    chosen = q.quantize_linear(name, w, stats, 4.0)
    assert chosen.info["alpha"] == min(errs, key=errs.get)
    assert errs[0.5] < errs[0.0]  # the large norm channels make smoothing worth it here


def test_exact_metric_switch(model, calibration):
    art = quantized(model, calibration, name="edgeflow", budget_bits=5, re_metric="exact", alpha_grid=[0.5])
    assert art.manifest["quantizer"]["params"]["re_metric"] == "exact"


def test_layer_selection_and_budgets(model, calibration):
    art = quantized(model, calibration, name="edgeflow", budget_bits=4, layers=["*.mlp.*"],
                    layer_budgets={"*.down_proj": 6}, embedding_bits=16, alpha_grid=[0.5])
    assert all(".mlp." in n for n in art.linears)
    assert art.manifest["linears"]["model.layers.1.mlp.down_proj"]["mean_bits"] == 6
    assert art.others["model.layers.0.self_attn.q_proj.weight"].dtype == torch.float16
    assert art.others["model.embed_tokens.weight"].dtype == torch.float16
    assert art.manifest["runtime_compatible"] is False
    assert "kept in FP16" in art.manifest["runtime_incompatible_reason"]
    fq = build_fakequant_model(art, model)  # still runs: the kept layers are plain float linears
    assert torch.isfinite(fq(torch.tensor([[1, 2, 3]])).logits).all()


def test_tied_embeddings_store_one_table():
    model = tiny_llama(tie=True)
    calib = [torch.arange(16)]
    art = quantized(model, calib, name="uniform", budget_bits=8, alpha_grid=[0.5])
    assert "model.embed_tokens.codes" in art.others and not any(k.startswith("lm_head") for k in art.others)


def test_an_lm_head_in_the_bit_budget_gets_the_quantizers_own_allocation(model, calibration):
    """lm_head=budget on an untied model: the head's rows get the quantizer's own allocation at the budget (EdgeFlow's
    greedy RE allocation: mixed widths, the spikier rows more bits); the default (table) keeps the 8-bit table."""
    with torch.no_grad():  # half the head's rows spiky: their RE at a given width is far larger
        model.lm_head.weight[128:, :1] = 1.0
    art = quantized(model, calibration, name="edgeflow", budget_bits=4, alpha_grid=[0.0], lm_head="budget")
    bits = art.others["lm_head.bits"].to(torch.int64)
    assert int(bits.sum()) == 4 * bits.numel()  # (the whole table meets the budget, as every linear does)
    assert float(bits[128:].float().mean()) > float(bits[:128].float().mean()) + 1
    assert art.manifest["lm_head"] == {"storage": "budget", "bits_per_weight": 4.0, "copy_of_tied_embedding": False}
    codes = art.others["lm_head.codes"].to(torch.int32)
    assert bool(((codes >= -(1 << (bits - 1))[:, None]) & (codes < (1 << (bits - 1))[:, None])).all())
    table = quantized(model, calibration, name="edgeflow", budget_bits=4, alpha_grid=[0.0])
    assert bool((table.others["lm_head.bits"] == 8).all()) and table.manifest["lm_head"]["storage"] == "table"
    six = quantized(model, calibration, name="edgeflow", budget_bits=4, alpha_grid=[0.0], lm_head="budget",
                    layer_budgets={"lm_head": 6})  # the head's own budget
    assert int(six.others["lm_head.bits"].to(torch.int64).sum()) == 6 * bits.numel()
    uniform = quantized(model, calibration, name="uniform", budget_bits=4, alpha_grid=[0.0], lm_head="budget")
    assert bool((uniform.others["lm_head.bits"] == 4).all())  # a uniform quantizer's head is uniform too


def test_a_tied_table_stays_one_table_unless_the_head_is_budgeted():
    """The default keeps a tied table whole (it is the embedding too); lm_head=budget gives the head its own copy at
    the budget, the artifact untied, and the fake-quant model computes it."""
    model = tiny_llama(tie=True)
    calib = [torch.arange(16)]
    auto = quantized(model, calib, name="edgeflow", budget_bits=5, alpha_grid=[0.5])
    assert auto.manifest["lm_head"] == {"storage": "table", "tied_to": "model.embed_tokens"}
    assert auto.manifest["model"]["config"]["tie_word_embeddings"] is True
    own = quantized(model, calib, name="edgeflow", budget_bits=5, alpha_grid=[0.5], lm_head="budget")
    assert own.manifest["model"]["config"]["tie_word_embeddings"] is False
    assert own.manifest["lm_head"]["copy_of_tied_embedding"] is True
    assert int(own.others["lm_head.bits"].to(torch.int64).sum()) == 5 * model.config.vocab_size
    assert bool((own.others["model.embed_tokens.bits"] == 8).all())  # the lookup table is unchanged
    fq = build_fakequant_model(own, model)
    head = own.others["lm_head.codes"].float() * own.others["lm_head.w_scale"][:, None]
    assert torch.equal(fq.lm_head.weight, head) and not torch.equal(fq.model.embed_tokens.weight, head)
    assert model.lm_head.weight is model.model.embed_tokens.weight  # (the FP model is left tied)


def test_bad_inputs_give_clear_errors(model, calibration):
    with pytest.raises(ConfigError, match="budget_bits"):
        make_quantizer({"name": "edgeflow", "budget_bits": 9})
    with pytest.raises(ConfigError, match="budget_bits"):
        make_quantizer({"name": "edgeflow", "budget_bits": 0.5})
    with pytest.raises(ConfigError, match="alpha_grid"):
        make_quantizer({"name": "edgeflow", "alpha_grid": [1.5]})
    with pytest.raises(ConfigError, match="no key.*'bogus'"):
        make_quantizer({"name": "edgeflow", "bogus": 1})
    with pytest.raises(ConfigError, match="unknown quantizer 'nope'"):
        make_quantizer({"name": "nope"})
    with pytest.raises(ConfigError, match="re_metric"):
        make_quantizer({"name": "edgeflow", "re_metric": "mse"})
    with pytest.raises(ConfigError, match="lm_head.*table or budget"):
        make_quantizer({"name": "edgeflow", "lm_head": "int4"})
    q = make_quantizer({"name": "edgeflow"})
    with pytest.raises(ValueError, match="calibration set is empty"):
        q.calibrate(model, [])
    with pytest.raises(ValueError, match="outside"):
        q.calibrate(model, [torch.tensor([1, 999])])
    with pytest.raises(RuntimeError, match="calibrate"):
        q.quantize(model)
    q = make_quantizer({"name": "edgeflow", "layers": ["*.q_proj", "*.qkv_proj"]})
    q.calibrate(model, calibration)
    with pytest.raises(ValueError, match="'\\*.qkv_proj' matches no"):
        q.quantize(model)
    with torch.no_grad():
        model.model.layers[1].mlp.up_proj.weight[3, 5] = float("nan")
    q = make_quantizer({"name": "edgeflow", "alpha_grid": [0.5]})
    q.calibrate(model, calibration)
    with pytest.raises(ValueError, match="model.layers.1.mlp.up_proj: weight has 1 NaN/Inf"):
        q.quantize(model)


def test_registry_lists_the_builtins():
    assert set(BUILTIN) <= set(REGISTRY)
