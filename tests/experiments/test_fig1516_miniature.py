"""Miniature Figures 15 and 16 through the same sweeps, runner, systems and renderers as `make reproduce-fig15
reproduce-fig16`: a tiny random Llama (the default model's tokenizer, so llama.cpp converts it), a 16-token prompt,
8 generated tokens, llama.cpp against EdgeFlow at 5 bits."""
import pytest

from experiments import fig15, lineup
from harness.runner.store import ResultsStore
from pictures import drawn_in

# rss_sample_ms=2: the tiny model's EdgeFlow runs last 10-20 ms, so the default 10 ms gave some runs a one-point
# timeline (seen in CI: 1 sample where the test wants a timeline of at least 2)
OVERRIDES = ["model.name=tiny-fig1516-test", "model.source=hf", "protocol.repetitions=2", "protocol.warmup_runs=0",
             "protocol.busy_policy=flag", "protocol.rss_sample_ms=2"]
PARAMS = dict(systems=("llamacpp", "edgeflow"), bits=(5,), prompt_tokens=16, rounds=1)


@pytest.mark.real_model
@pytest.mark.slow
def test_miniature_fig15_and_fig16(tmp_path, tiny_checkpoint):
    from experiments.run import points, render
    from harness.runner.sweep import run_sweep

    store = ResultsStore(tmp_path / "runs")
    overrides = [*OVERRIDES, f"model.path={tiny_checkpoint}"]
    sweep = points("fig15", overrides, gen_tokens=8, **PARAMS) + points("fig16", overrides, **PARAMS)
    counts = run_sweep(sweep, store, desc="mini fig15/16")
    assert counts["ok"] == len(sweep) == 4

    done = store.read("completion")
    ok = done[done.status == "ok"]
    assert set(ok.loc[ok.metric == "gen_tokens", "value"]) == {8.0}
    assert (ok.loc[ok.metric == "decode_s", "value"] > 0).all()
    assert (ok.loc[ok.metric == "resident_before", "value"] <= 0.01).all()  # every run started cold
    switch = ok[ok.metric == "graph_switch_s"].set_index(["system", "repetition"])
    assert (switch.loc["edgeflow", "value"] >= 0).all()  # measured: prefill end -> first decode step
    llama = switch.loc["llamacpp"]
    assert llama["value"].isna().all() and llama["notes"].str.startswith("not applicable").all()
    assert (ok[ok.metric == "prompt_tokens"]["value"] == 16).all()  # llama.cpp saw the same prompt length

    cold = store.read("coldstart")
    rss = cold[(cold.metric == "peak_rss_mb") & (cold.status == "ok")]
    assert len(rss) == 4 and not rss["notes"].str.contains("timeline").any()  # data in rows, not in the notes
    samples = cold[(cold.metric == "rss_mib") & (cold.status == "ok")]
    per_run = samples.groupby(["system", "repetition"])
    assert len(per_run) == 4 and (per_run["at_s"].min() >= 0).all() and (per_run.size() >= 2).all()
    peaks = rss.set_index(["system", "repetition"])["value"]
    assert (per_run["value"].max().reindex(peaks.index) <= peaks + 0.01).all()  # the peak summarizes its timeline
    energy = cold[cold.metric == "energy_j"]
    assert (energy["value"].notna() | energy["notes"].str.contains("energy counter")).all()  # a number or why not

    for name in ("fig15", "fig16"):
        section = render(name, store, tmp_path, systems=PARAMS["systems"])
        assert "n=2" in section.body or "| 2 |" in section.body  # both repetitions of the one round
        pngs = [f for f in section.figures if f.suffix == ".png"]
        assert pngs and all(f.is_relative_to(tmp_path) for f in pngs)
        # what a reader sees: Figure 15's phases as bars, Figure 16's engines as memory lines (thin: a lower share)
        colours = fig15.COLORS.values() if name == "fig15" else [lineup.color(s) for s in PARAMS["systems"]]
        assert all(drawn_in(pngs[0], c, at_least=1e-4) for c in colours), name
        assert "EdgeFlow 5b" in section.body and "llama.cpp" in section.body
