"""A miniature Figure 10 through the same sweep, runner, systems and renderer as `make reproduce-fig10`: a tiny random
Llama (the default model's tokenizer, so llama.cpp converts it), one dataset, llama.cpp against EdgeFlow at 5 bits."""
import pytest
from matplotlib.colors import to_hex

from experiments import fig10, selection
from harness.runner.store import ResultsStore
from pictures import drawn_in


@pytest.mark.real_model
@pytest.mark.slow
def test_miniature_fig10_sweep_measures_and_draws(tmp_path, tiny_checkpoint):
    from experiments.run import points, render
    from harness.runner.sweep import run_sweep

    store = ResultsStore(tmp_path / "runs")
    params = dict(datasets=("lambada",), systems=("llamacpp", "edgeflow"), bits=(5,))
    overrides = ["model.name=tiny-fig10-test", f"model.path={tiny_checkpoint}", "model.source=hf",
                 "protocol.repetitions=2", "protocol.warmup_runs=0", "protocol.busy_policy=flag"]
    sweep = points("fig10", overrides, ttft_prompts=1, eval_limit=8, fidelity_windows=2, **params)
    counts = run_sweep(sweep, store, desc="mini fig10")
    # TTFT of each system; accuracy and fidelity: each engine's own forward pass, and the INT8 stand-in's
    assert len(sweep) == 8 and counts["ok"] == 8

    ttft = store.read("ttft")
    medians = ttft[ttft.metric == "ttft_s"].groupby("system")["value"].median()
    assert set(medians.index) == {"llamacpp", "edgeflow"} and (medians > 0).all()
    assert (ttft[ttft.metric == "resident_before"]["value"] <= 0.01).all()  # every run started cold
    acc = store.read("accuracy")
    scored = acc[acc.metric == "accuracy"]
    assert set(scored["data_source"]) == {"proxy"}  # offline: the local proxy, said so
    # the engines' rows are measured (on proxy data); the fake-quant INT8 model's stand in for the baselines' engines
    assert dict(zip(scored["system"].fillna("none"), scored["label"])) == \
        {"edgeflow": "proxy", "llamacpp": "proxy", "none": "stand-in"}
    by = {s if isinstance(s, str) else "stand-in": g for s, g in acc.groupby(acc["system"].fillna("stand-in"))}
    ef_acc = by["edgeflow"][by["edgeflow"].metric == "accuracy"]  # its runtime's, through the System contract
    assert ef_acc["notes"].str.contains("scored by edgeflow's own forward pass over efpk weightlet").all()
    assert set(ef_acc["numerics"]) == {"npu"} and set(by["llamacpp"]["numerics"].dropna()) == set()
    assert "agreement_top1" in set(by["edgeflow"]["metric"])
    assert by["llamacpp"].loc[by["llamacpp"].metric == "accuracy", "notes"].str.contains(
        "scored by llamacpp's own forward pass over gguf Q8_0").all()
    assert set(by["stand-in"]["quantizer"]) == {"uniform"}
    fidelity = store.read("fidelity")
    engines = fidelity[(fidelity.metric == "kl_fp16_runtime") & fidelity.system.notna()]
    assert set(engines["system"]) == {"llamacpp", "edgeflow"} and (engines["value"] >= 0).all()
    # EdgeFlow's TTFT, accuracy and KL: one artifact under one numerics, the NPU's (requantized outputs)
    npu = "NPU numerics: A8, outputs requantized to static grids per output channel"
    for rows in (ttft[(ttft.system == "edgeflow") & (ttft.metric == "ttft_s")],
                 by["edgeflow"][by["edgeflow"].metric == "accuracy"],
                 engines[engines.system == "edgeflow"]):
        assert len(rows) and rows["notes"].str.contains(npu, regex=False).all()

    section = render("fig10", store, tmp_path, **params)
    pngs = [f for f in section.figures if f.suffix == ".png"]
    assert pngs and all(f.is_relative_to(tmp_path) for f in pngs)
    timed = fig10.tidy(selection.read_rows(store, fig10.EXPERIMENTS)).ttft_all  # each engine's bars, as drawn
    colours = fig10.series_colors(timed)
    assert len(colours) == 2 and all(drawn_in(pngs[0], to_hex(c)) for c in colours.values()), colours
    assert "EF 5b" in section.body and "llama.cpp" in section.body and "stand-in (fake-quant INT8)" in section.body
    assert "Quality against the FP16 model" in section.body and "the baselines' own accuracy" in section.body
