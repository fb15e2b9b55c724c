"""The perplexity kind: one row per window scored, FP16's windows scored once and reused by every quantized job, and a
quantized job sized by the interval of its difference from FP16 (experiment.ppl_halfwidth)."""
import math

import pytest

from harness.runner.job import run_job
from harness.runner.store import ResultsStore
from harness.runner.sweep import compose_config


@pytest.mark.real_model
def test_windows_are_rows_cached_and_paired_with_fp16(tmp_path, tiny_checkpoint, fresh_model_name):
    name = fresh_model_name("tiny-ppl")  # fresh window and artifact caches
    store = ResultsStore(tmp_path / "runs")
    base = [f"model.name={name}", f"model.path={tiny_checkpoint}", "model.source=hf", "experiment=perplexity",
            "experiment.extra.ppl_window=64", "experiment.ppl_max_windows=24"]
    assert run_job(compose_config(base), store) == "ok"
    rows = store.read("perplexity")
    fp = rows[rows.metric == "window_nll"].set_index("prompt_index")["value"]
    assert sorted(fp.index) == list(range(24))  # FP16 scores every window: the mean the differences add to
    assert "0 windows from the cache, 24 scored" in rows.loc[rows.metric == "perplexity", "notes"].iloc[0]

    q = [*base, "quantizer=rtn_clip", "quantizer.budget_bits=4.0", "experiment.ppl_halfwidth=0.05"]
    assert run_job(compose_config(q), store) == "ok"
    rows = store.read("perplexity")
    rows = rows[rows.quantizer == "rtn_clip"]
    mine = rows[rows.metric == "window_nll"].set_index("prompt_index")["value"]
    ref = rows[rows.metric == "window_nll_ref"].set_index("prompt_index")["value"]
    assert 8 <= len(mine) <= 24 and list(mine.index) == list(ref.index) == list(range(len(mine)))
    assert (ref == fp.loc[ref.index]).all()  # the FP16 job's windows, read from the cache, not rescored
    # the fake-quant model stands in for an integer engine; FP16's NLLs beside it are measured; both on proxy text
    labels = rows.groupby("metric")["label"].agg(set)
    assert labels["window_nll"] == labels["perplexity"] == {"stand-in"} and labels["window_nll_ref"] == {"proxy"}
    scored = rows.metric.isin(["perplexity", "window_nll", "window_nll_ref"])  # effective_bits has no data
    assert set(rows.loc[scored, "data_source"]) == {"proxy"}
    notes = rows.loc[rows.metric == "perplexity", "notes"].iloc[0]
    assert f"FP16: {len(mine)} windows from the cache, 0 scored" in notes and "sized against FP16" in notes
    ppl = rows.loc[rows.metric == "perplexity", "value"].iloc[0]
    assert ppl == pytest.approx(math.exp(mine.mean()), rel=1e-12)

    assert run_job(compose_config([*q, "run.resume=false"]), store) == "ok"  # again: every window cached
    notes = store.read("perplexity").query("metric == 'perplexity' and quantizer == 'rtn_clip'")["notes"]
    assert f"{len(mine)} windows from the cache, 0 scored" in notes.iloc[-1]


def test_a_bad_halfwidth_names_the_key(tmp_path):
    from harness.config import ConfigError

    with pytest.raises(ConfigError, match="experiment.ppl_halfwidth must be a positive number"):
        run_job(compose_config(["experiment=perplexity", "experiment.ppl_halfwidth=-1"]), ResultsStore(tmp_path))
