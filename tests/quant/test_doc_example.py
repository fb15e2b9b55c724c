"""docs/adding-a-quantizer.md's worked example is executable: the shipped rtn_clip is the doc's code and YAML, and the
doc's module, registered on its own, goes through a miniature `make compare-quantizers` on a tiny model (the same
sweep, runner, kinds and renderer), so the doc cannot rot."""
import re
import sys
import types
from pathlib import Path

import pytest

from harness.quant import REGISTRY

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "adding-a-quantizer.md"


def doc_blocks() -> tuple[str, str]:
    """(the rtn_clip module, its YAML) as the doc shows them."""
    blocks = re.findall(r"```(\w+)\n(.*?)```", DOC.read_text(), re.S)
    module = [b for lang, b in blocks if lang == "python" and "@register" in b]
    config = [b for lang, b in blocks if lang == "yaml" and "name: rtn_clip" in b]
    assert len(module) == 1 and len(config) == 1, "the doc must show one rtn_clip module and one rtn_clip YAML"
    return module[0], config[0]


def test_the_shipped_rtn_clip_is_the_docs_example():
    module, config = doc_blocks()
    shipped = (REPO / "harness" / "quant" / "methods" / "rtn_clip.py").read_text()
    assert shipped.endswith(module), "harness/quant/methods/rtn_clip.py differs from the doc's code (below its docstring)"
    assert (REPO / "conf" / "quantizer" / "rtn_clip.yaml").read_text() == config


def test_the_doc_shows_the_comparison_command_and_its_output():
    text = DOC.read_text()
    assert "make compare-quantizers QUANTIZERS=rtn_clip,edgeflow,cmpq" in text
    assert "| rtn_clip | 4 |" in text and "compare-quantizers.png" in text


@pytest.fixture
def doc_quantizer(monkeypatch):
    """The doc's module executed as a module of its own and registered in place of the shipped copy; counts its
    quantize_linear calls so the test can see that the doc's code did the work."""
    module, _ = doc_blocks()
    monkeypatch.delitem(REGISTRY, "rtn_clip")
    mod = types.ModuleType("doc_rtn_clip")
    monkeypatch.setitem(sys.modules, mod.__name__, mod)
    exec(compile(module, str(DOC), "exec"), mod.__dict__)
    cls = REGISTRY["rtn_clip"]
    assert cls.__module__ == "doc_rtn_clip"
    calls = []
    original = cls.quantize_linear

    def counted(self, *args, **kwargs):
        calls.append(args[0])
        return original(self, *args, **kwargs)

    monkeypatch.setattr(cls, "quantize_linear", counted)
    return calls


@pytest.mark.real_model
@pytest.mark.slow
def test_doc_example_in_a_miniature_compare_quantizers(tmp_path, tiny_checkpoint, doc_quantizer, fresh_model_name):
    import math

    from experiments import compare_quantizers as cq
    from experiments.run import run
    from harness.runner.store import ResultsStore

    name = fresh_model_name("tiny-cq")  # fresh caches: everything is really made
    store = ResultsStore(tmp_path / "runs")
    overrides = [f"model.name={name}", f"model.path={tiny_checkpoint}", "model.source=hf", "protocol.warmup_runs=0"]
    params = dict(quantizers=("rtn_clip", "edgeflow", "shadow_outlier"), bits=(4,), datasets=("lambada-local",),
                  eval_limit=4, ppl_windows=1, ppl_window=128, fidelity_windows=2, fidelity_window=64,
                  ttft_prompt_tokens=16, ttft_repetitions=1, wikitext2=False)
    section = run(cq.NAME, store, tmp_path, overrides, **params)
    assert doc_quantizer, "the doc's rtn_clip never quantized a layer"
    rows = store.read(cq.NAME)
    assert set(rows["status"]) <= {"ok", "not run"}, rows.loc[rows.status == "failed", "error"].tolist()

    df = cq.table(rows).set_index("quantizer")
    for q in ("rtn_clip", "edgeflow"):
        r = df.loc[q]
        assert 4.0 < r.effective_bits < 6.0 and r.packed_mb > 0 and r.quantize_s > 0
        assert r.kl_fp16 > 0 and 0 < r.top1_agreement <= 1 and math.isfinite(r.kl_fp16_ci)
        # the runtime computes what the static fake-quant model computes; float activations lose less
        assert r.kl_fp16_runtime == pytest.approx(r.kl_fp16, rel=0.25, abs=1e-3)
        assert r.kl_fp16_weight_only <= r.kl_fp16 * 1.1
        assert r["ttft native"] > 0 and r["ppl local"] > 1 and 0 <= r["acc lambada-local"] <= 1
    so = df.loc["shadow_outlier"]
    assert "float" in so.ttft_reason and not math.isfinite(so.get("ttft native", math.nan))
    assert df.loc["fp16", "ppl local"] > 1

    assert section.verdict == "no paper claim"
    png = tmp_path / "figures" / f"{cq.NAME}.png"
    assert png in section.figures and png.stat().st_size > 20_000
    assert "| rtn_clip | 4 |" in section.body and "not run: " in section.body
