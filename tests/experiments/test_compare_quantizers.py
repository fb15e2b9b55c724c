"""compare-quantizers: its sweep, its table and figure on synthetic rows (fast), and - in test_doc_example.py - a
miniature run on a tiny model with the documented rtn_clip."""
import math

import matplotlib.pyplot as plt
import pandas as pd
import pytest
from matplotlib.colors import to_hex

from experiments import compare_quantizers as cq
from harness.config import ConfigError, config_hash
from harness.runner.store import ResultsStore
from harness.runner.sweep import compose_config
from pictures import drawn_in


def test_default_sweep_covers_every_registered_quantizer_and_skips_ttft_the_runtime_cannot_run():
    from harness.quant import REGISTRY

    pts = cq.sweep(bits=(4,), wikitext2=False)
    quantizers = {o.split("=")[1] for p in pts for o in p if o.startswith("quantizer=")}
    assert {cq.options()[q] for q in REGISTRY} == quantizers
    ttft = [p for p in pts if "experiment=ttft" in p]
    assert ttft and not any("quantizer=shadow_outlier" in p for p in ttft)
    assert all("system=edgeflow" in p for p in ttft)
    assert any("quantizer=shadow_outlier" in p for p in pts if "experiment=fidelity" in p)
    fp = [p for p in pts if not any(o.startswith("quantizer=") for o in p)]
    assert {p[0] for p in fp} == {"experiment=perplexity", "experiment=accuracy"}  # the FP16 reference


def test_flash_emulation_adds_a_ttft_point_and_wikitext2_a_perplexity_point():
    pts = cq.sweep(quantizers=("edgeflow",), bits=(5,), flash_mbps=200, wikitext2=True)
    ttft = [p for p in pts if "experiment=ttft" in p]
    assert len(ttft) == 2 and sum("device.flash_read_mbps=200.0" in p for p in ttft) == 1
    assert sum("experiment.extra.ppl_source=wikitext2" in p for p in pts) == 2  # FP16 and edgeflow


def test_npu_adds_htp_to_the_fidelity_points_only():
    pts = cq.sweep(quantizers=("edgeflow",), bits=(5,), npu="sm8650", wikitext2=False)
    assert [p for p in pts if "npu=sm8650" in p] == [p for p in pts if "experiment=fidelity" in p]
    assert not any(o.startswith("npu=") for p in cq.sweep(quantizers=("edgeflow",), bits=(5,), wikitext2=False)
                   for o in p)


def test_npu_makes_every_point_of_a_quantizer_with_an_npu_recipe_that_one_artifact():
    """The fidelity point's `npu` selects EdgeFlow's recipe for NPUs (conf/npu_recipe/); its TTFT, perplexity and
    accuracy points spell the same recipe out, so all four measure one artifact; so do AIMET's (16-bit activations).
    CMPQ has no recipe: the paper's."""
    from harness.runner.job import prepare_job

    pts = cq.sweep(quantizers=("edgeflow", "aimet", "cmpq"), bits=(4, 5), npu="sm8650", wikitext2=False)
    edgeflow = [p for p in pts if "quantizer=edgeflow" in p]
    assert {p[0] for p in edgeflow} == {"experiment=fidelity", "experiment=ttft", "experiment=perplexity",
                                        "experiment=accuracy"}
    assert all("+quantizer.alpha_search=npu" in p for p in edgeflow)
    assert all("+quantizer.act_bits=16" in p for p in pts if "quantizer=aimet" in p)
    assert not any(o.startswith("+quantizer.") for p in pts if "quantizer=cmpq" in p for o in p)
    edgeflow = [p for p in edgeflow if "quantizer.budget_bits=5.0" in p]
    hashes = {config_hash(prepare_job(compose_config(p)).cfg.quantizer) for p in edgeflow}
    paper = prepare_job(compose_config(["experiment=fidelity", "quantizer=edgeflow", "quantizer.budget_bits=5.0"]))
    assert len(hashes) == 1 and hashes != {config_hash(paper.cfg.quantizer)}
    at_8 = [p for p in cq.sweep(quantizers=("edgeflow",), bits=(8,), npu="sm8650", wikitext2=False)
            if "quantizer=edgeflow" in p]
    assert all("+quantizer.a16_budget=1.0" in p for p in at_8)  # the recipe's own 8-bit entry, at every point


def test_an_unknown_quantizer_is_an_error_naming_the_registered_ones():
    with pytest.raises(ConfigError, match=r"unknown quantizer\(s\) \['mine'\].*rtn_clip"):
        cq.sweep(quantizers=("mine",), wikitext2=False)


def test_every_point_composes_and_validates():
    from harness.runner.job import prepare_job
    from harness.runner.sweep import compose_config

    for p in cq.sweep(quantizers=("rtn_clip", "shadow_outlier"), bits=(4,), flash_mbps=200, wikitext2=True,
                      npu="sm8550", fidelity_texts=("ppl-local", "python-docs")):
        prepare_job(compose_config(p))


def test_each_fidelity_text_is_a_fidelity_point_of_its_own():
    """The held-out split keeps its points' identity (no override: stored rows resume); another text adds one."""
    def fidelity(**kw):
        return [p for p in cq.sweep(quantizers=("rtn_clip",), bits=(4,), wikitext2=False, **kw)
                if p[0] == "experiment=fidelity"]

    held_out = fidelity()
    assert len(held_out) == 1 and not any("fidelity_text" in o for o in held_out[0])
    both = fidelity(fidelity_texts=("ppl-local", "python-docs"))
    assert both[0] == held_out[0] and both[1] == [*held_out[0], "+experiment.extra.fidelity_text=python-docs"]
    assert fidelity(fidelity_texts="python-docs") == both[1:]  # --param fidelity_texts=python-docs: a string


def test_pareto_front():
    assert cq.pareto([(4, 1.0), (5, 0.5), (6, 0.6), (7, 0.1), (4.5, 2.0)]) == [(4, 1.0), (5, 0.5), (7, 0.1)]


def _rows():
    """Rows as the kinds write them: two methods at two budgets, one the runtime cannot run, and FP16."""
    rows = []

    def row(q, bits, metric, value, rep=0, **kw):
        rows.append({"model": "m", "quantizer": q, "bits": bits, "metric": metric, "value": value, "unit": "",
                     "status": "ok", "label": "measured", "repetition": rep, "config_hash": f"{q}{bits}{metric}",
                     "device": "local", **kw})

    row("fp16", 16.0, "perplexity", 20.0, dataset="ppl-local")
    row("fp16", 16.0, "accuracy", 0.4, dataset="lambada-local", items=20, notes="n=20, shots=0, stderr=0.1")
    row("fp16", 16.0, "perplexity", 30.0, dataset="lambada-local")  # lm-eval's lambada perplexity: not a ppl column
    for q, base in (("rtn_clip", 1.0), ("shadow_outlier", 0.5)):
        for b in (4.0, 6.0):
            scale = base / (b - 3)
            row(q, b, "effective_bits", b + 0.3)
            row(q, b, "quantize_s", 3.0)
            row(q, b, "perplexity", 20 + 10 * scale, dataset="ppl-local")
            row(q, b, "accuracy", 0.4 - scale / 10, dataset="lambada-local", items=20, notes="n=20, stderr=0.05")
            for i, k in enumerate((0.9, 1.0, 1.1)):
                row(q, b, "kl_fp16", scale * k, rep=i)
                row(q, b, "top1_agreement", 1 - scale / 4 * k, rep=i)
                if q == "rtn_clip":  # with npu=...: the quantized linears on QNN's HTP simulator, on two texts
                    row(q, b, "kl_fp16_htp", 1.2 * scale * k, rep=i, label="simulated", dataset="ppl-local")
                    row(q, b, "kl_fp16_htp", 2.4 * scale * k, rep=i, label="simulated", dataset="python-docs")
            if q == "rtn_clip":
                row(q, b, "packed_mb", 50 + b)
                for i, t in enumerate((0.30, 0.32, 0.35)):
                    row(q, b, "ttft_s", t * b / 4, rep=i, system="edgeflow")
                    row(q, b, "ttft_s", 2 * t * b / 4, rep=i, system="edgeflow", flash_emulated_mbps=200.0,
                        label="emulated")
            else:
                rows.append({"model": "m", "quantizer": q, "bits": b, "metric": "packed_mb", "value": None,
                             "status": "not run", "label": "not run", "error": "the runtime cannot run it: float"})
    return rows


def test_table_has_every_metric_with_intervals_and_not_run_reasons():
    df = cq.table(pd.DataFrame(_rows()))
    r = df[(df.quantizer == "rtn_clip") & (df.bits == 4.0)].iloc[0]
    assert r.kl_fp16 == pytest.approx(1.0) and r.kl_fp16_ci > 0 and r["ttft native"] == pytest.approx(0.32)
    assert r["ttft 200 MB/s"] == pytest.approx(0.64) and r.packed_mb == 54
    text = cq.display(df)
    assert list(text["method"]) == ["fp16", "rtn_clip", "rtn_clip", "shadow_outlier", "shadow_outlier"]
    so = text[text.method == "shadow_outlier"].iloc[0]
    assert so["cold TTFT native s"].startswith("not run: ") and "float" in so["cold TTFT native s"]
    assert "±" in so["KL vs FP16"]
    # accuracy's interval is Wilson's over the rows' items (35% of 20: [18.1, 56.7]), not lm-eval's stderr in the notes
    assert so["acc lambada-local %"] == "35 [18.1–56.7]"
    fp = text[text.method == "fp16"].iloc[0]
    assert fp["ppl local"] == "20" and fp["KL vs FP16"] == "–" and "ppl lambada-local" not in text
    assert text[text.method == "rtn_clip"].iloc[0]["KL HTP (simulated)"].startswith("1.2 ±")
    assert text[text.method == "rtn_clip"].iloc[0]["KL HTP (simulated), python-docs"].startswith("2.4 ±")
    assert so["KL HTP (simulated)"] == "–" and so["KL HTP (simulated), python-docs"] == "–"
    assert "KL vs FP16, python-docs" not in text  # a text's column only where rows have it


@pytest.mark.parametrize("htp", [True, False])
def test_render_draws_a_table_and_pareto_plots(tmp_path, htp):
    """Each method's points in its own colour; with HTP rows (npu=<soc>) the panels draw HTP's KL, and a method
    without it is left out (named on the panel), never drawn with the fake-quant KL beside HTP's."""
    store = ResultsStore(tmp_path / "runs")
    store.append(cq.NAME, [r for r in _rows() if htp or not r["metric"].endswith("_htp")])
    from experiments.run import render

    section = render(cq.NAME, store, tmp_path)
    assert section.verdict == "no paper claim" and "rtn_clip, shadow_outlier" in section.summary
    png = tmp_path / "figures" / f"{cq.NAME}.png"
    assert png in section.figures
    # each quantized method's points and error bars in its own colour (tab10 by sorted name; FP16 is no point)
    table = cq.table(store.read(cq.NAME))
    assert cq.drawn_kl(table)[0] == ("kl_fp16_htp" if htp else "kl_fp16")
    methods = sorted(set(table["quantizer"]) - {"fp16"})
    drawn = {"rtn_clip"} if htp else set(methods)
    for j, m in enumerate(methods):
        assert drawn_in(png, to_hex(plt.get_cmap("tab10")(j % 10)), at_least=1e-4) == (m in drawn), m
    assert "| shadow_outlier | 4 |" in section.body and "not run: " in section.body
    assert not math.isnan(cq.table(store.read(cq.NAME))["kl_fp16"].iloc[-1])
