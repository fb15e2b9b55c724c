"""Figures 15 and 16 on synthetic rows (test fixtures, not measurements): the breakdown's arithmetic, the timelines
read back from the rows' notes, and "not run" with the reason wherever a number is absent."""
import pandas as pd
import pytest

from experiments import fig15, fig16, run, selection
from harness.runner.store import ResultsStore
from harness.systems.base import decode_metrics
from pictures import drawn_in

NO_COUNTER = "no readable energy counter on this host (checked /sys/class/powercap/intel-rapl:*/energy_uj)"
LLAMA_SWITCH = "not applicable: llama.cpp prefills and decodes on the CPU with the same weights"
# (ttft_s, decode_s, graph_switch_s or None) per repetition
COMPLETION = {"llamacpp": [(1.0, 6.0, None), (1.2, 6.4, None), (1.1, 6.2, None)],
              "edgeflow": [(0.5, 5.0, 1e-4), (0.7, 5.4, 2e-4), (0.6, 5.2, 1e-4)]}


def _row(experiment, system, rep, metric, value, notes="", **extra):
    base = {"experiment": experiment, "model": "smollm2-135m", "system": system, "device": "local",
            "dataset": "fixed-512", "prompt_tokens": 512, "metric": metric, "value": value, "unit": "s",
            "status": "ok", "label": "measured", "repetition": rep, "config_hash": f"{experiment}-{system}",
            "notes": notes, "host": "test", "flash_emulated_mbps": None}
    if system == "edgeflow":
        base.update(quantizer="edgeflow", bits=5.0, packing="weightlet")
    return {**base, **extra}


def _completion_rows():
    rows = []
    for system, reps in COMPLETION.items():
        for rep, (ttft, decode, switch) in enumerate(reps):
            rows.append(_row("completion", system, rep, "ttft_s", ttft))
            for m in decode_metrics(decode, 511, switch, LLAMA_SWITCH if switch is None else "prefill end -> decode"):
                rows.append(_row("completion", system, rep, m.name, m.value,
                                 "; ".join(x for x in (m.reason, m.detail, "prompt 0") if x)))
    rows.append(_row("completion", "llmnpu", 0, "not_run", None, status="not run", label="not run",
                     error="llm.npu (mllm) runs only on an Android phone with a Qualcomm NPU (QNN); device is local"))
    return rows


def _coldstart_rows():
    rows = []
    for system, peak in (("llamacpp", 300.0), ("edgeflow", 150.0)):
        for rep, ttft in enumerate((1.0, 0.8, 0.9)):
            samples = [(t / 100, peak * t / 100 / ttft) for t in range(0, int(ttft * 100) + 1)]
            rows += [_row("coldstart", system, rep, "ttft_s", ttft),
                     _row("coldstart", system, rep, "peak_rss_mb", peak, "prompt 0"),
                     *[_row("coldstart", system, rep, "rss_mib", v, at_s=t) for t, v in samples],
                     _row("coldstart", system, rep, "peak_pss_mb", None, "PSS is sampled only by an on-device sampler"),
                     _row("coldstart", system, rep, "energy_j", None, f"{NO_COUNTER}; prompt 0"),
                     _row("coldstart", system, rep, "avg_power_w", None, NO_COUNTER)]
    return rows


@pytest.fixture
def store(tmp_path):
    s = ResultsStore(tmp_path / "runs")
    s.append("completion", _completion_rows())
    s.append("coldstart", _coldstart_rows())
    return s


def test_fig15_breakdown_medians_and_totals(store):
    rows = selection.read_rows(store, fig15.EXPERIMENTS)
    bd = fig15.breakdown(rows).set_index("series")
    assert bd.loc["llama.cpp", "cold_median"] == pytest.approx(1.1)
    assert bd.loc["llama.cpp", "decode_median"] == pytest.approx(6.2)
    assert pd.isna(bd.loc["llama.cpp", "switch_median"]) and "not applicable" in bd.loc["llama.cpp", "switch_note"]
    assert bd.loc["llama.cpp", "total_median"] == pytest.approx(7.3)  # per-repetition sums 7.0, 7.6, 7.3
    assert (bd.loc["llama.cpp", "total_min"], bd.loc["llama.cpp", "total_max"]) == pytest.approx((7.0, 7.6))
    assert bd.loc["EdgeFlow 5b", "total_median"] == pytest.approx(5.8001)
    speed = fig15.decode_speedups(fig15.breakdown(rows))
    assert speed["speedup"].item() == pytest.approx(6.2 / 5.2)


def test_fig15_render_says_what_did_not_run(store, tmp_path):
    section = run.render("fig15", store, tmp_path / "out")
    assert [p.name for p in section.figures] == ["fig15.png", "fig15.pdf"]
    for phase in ("cold start", "decode"):  # the measured systems' bars, phase by phase (fig15.COLORS)
        assert drawn_in(section.figures[0], fig15.COLORS[phase]), f"no {phase} bars"
    assert "runs only on an Android phone" in section.body
    assert "n/a: not applicable" in section.body  # llama.cpp's graph switch
    assert "1.19x" in section.body  # EdgeFlow's decode speedup over llama.cpp
    # EdgeFlow's switch (0.1 ms of 5.8 s) reproduces "no switch"; the decode speedups over llm.npu+ are not run
    assert section.verdict == "qualitative"  # not the paper's model: the switch statement is capped


def test_fig16_timelines_come_back_from_their_rows(store):
    rows = selection.read_rows(store, fig16.EXPERIMENTS)
    r = fig16.runs(rows)
    assert len(r) == 6 and all(len(t) > 10 for t in r["rss"])
    picked = fig16.median_run(r).set_index("series")
    assert picked.loc["EdgeFlow 5b", "ttft_s"] == pytest.approx(0.9)  # the median repetition is the one drawn
    assert r["energy_j"].isna().all() and set(r["energy_j_why"]) == {NO_COUNTER}


def test_fig16_render_marks_energy_not_run_with_the_reason(store, tmp_path):
    section = run.render("fig16", store, tmp_path / "out")
    assert [p.name for p in section.figures] == ["fig16.png", "fig16.pdf"]
    assert f"not run: {NO_COUNTER}" in section.body
    assert "150 [150–150]" in section.body  # EdgeFlow's peak RSS
    assert "EdgeFlow / llm.npu+ energy" in section.body and section.verdict in ("not run", "partly reproduced", "qualitative",
                                                                               "differs")


def test_older_rows_give_their_timelines_from_the_notes(tmp_path):
    """Rows written before samples were rows of their own kept them in their summary's notes: the store reads them
    as sample rows (once: not where the run has sample rows already), and the figure never reads notes."""
    store = ResultsStore(tmp_path)
    run_row = {"config_hash": "old", "repetition": 0, "label": "measured", "system": "edgeflow"}
    store.append("coldstart", [
        {**run_row, "metric": "energy_j", "value": None, "unit": "J",
         "notes": "x; power timeline (s, W): [[0.0, 1.5], [0.25, 3.0]]; prompt 0"},
        {**run_row, "metric": "peak_rss_mb", "value": 150.0, "unit": "MB",
         "notes": "rss timeline (s, MiB): [[0.0, 9.0]]"},
        {**run_row, "metric": "rss_mib", "value": 140.0, "unit": "MiB", "at_s": 0.5}])
    rows = store.read("coldstart")
    assert fig16.timeline_of(rows, "power") == [(0.0, 1.5), (0.25, 3.0)]
    assert fig16.timeline_of(rows, "rss") == [(0.5, 140.0)]  # its own sample rows, not the notes' copy
    power = rows[rows.metric == "power_w"]
    assert set(power.unit) == {"W"} and power.notes.isna().all() and set(power.config_hash) == {"old"}
    assert fig16.timeline_of(rows, "pss") == []


def test_sweeps_carry_the_request_lengths():
    pts = fig15.sweep(systems=("llamacpp", "edgeflow"), prompt_tokens=16, gen_tokens=8)
    assert all("experiment.extra.gen_tokens=8" in p and "experiment.extra.prompt_tokens=16" in p for p in pts)
    assert any("quantizer.budget_bits=5.0" in p for p in pts)
    with pytest.raises(ValueError, match="gen_tokens"):
        fig15.sweep(gen_tokens=1)
    with pytest.raises(ValueError, match="unknown system"):
        fig16.sweep(systems=("vllm",))


def test_rounds_interleave_the_systems():
    pts = fig16.sweep(systems=("llamacpp", "mnn", "edgeflow"), rounds=2)
    systems = [next(o.split("=")[1] for o in p if o.startswith("system=")) for p in pts]
    assert systems == ["llamacpp", "mnn", "edgeflow"] * 2  # every system once per round
    assert all("protocol.repetitions=1" in p for p in pts)
    assert ["protocol.warmup_runs=0" in p for p in pts] == [False] * 3 + [True] * 3  # warm-up in round 1 only
    assert len({next(o for o in p if o.startswith("experiment.notes=")) for p in pts}) == 2  # a round per config


def _llmnpu_demo(rows: list[dict], model: str | None = None) -> list[dict]:
    """llm.npu's demo measured beside the others: its own prompt on its own model files (workload says so), with
    numbers that would make a fine ratio."""
    out = []
    for r in rows:
        if r["system"] != "llamacpp":
            continue
        r = {**r, "system": "llmnpu", "config_hash": f"{r['config_hash']}-npu", "model": model or r["model"],
             "workload": f"{selection.OWN_WORK}: mllm's demo prompt and model files"}
        if r["metric"] in selection.SENSOR_METRICS:
            r["value"] = 1.0
        out.append(r)
    return out


def test_llmnpu_demo_rows_are_never_divided_into(tmp_path):
    qwen = [{**r, "model": "qwen1.5-1.8b"} for r in _completion_rows() if r["system"] != "llmnpu"]
    powered = [{**r, "value": 2.0} if r["metric"] in selection.SENSOR_METRICS else r for r in _coldstart_rows()]
    store = ResultsStore(tmp_path / "runs")
    store.append("completion", qwen + _llmnpu_demo(qwen))
    store.append("coldstart", powered + _llmnpu_demo(powered))
    for name, statements in (("fig15", ["decode speedup over llm.npu+"]),
                             ("fig16", ["EdgeFlow / llm.npu+ average power", "EdgeFlow / llm.npu+ energy"])):
        section = run.render(name, store, tmp_path / name)
        for statement in statements:
            line = next(x for x in section.body.splitlines() if statement in x)
            assert "different work: the engine ran its own prompt" in line and "not run" in line, line
