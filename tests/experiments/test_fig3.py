"""Figure 3: the dequantization benchmark runs on a tiny shape and checks its own dequantization; the figure renders
from its rows with the paper's ratios beside ours, capped at qualitative (a CPU, not the paper's NPU)."""

from experiments import fig3, paper_values, rules
from harness.bench.dequant import run
from harness.runner.store import ResultsStore


def test_bench_measures_every_format_and_the_figure_renders(tmp_path):
    store = ResultsStore(tmp_path / "runs")
    report = run(store, shapes=((64, 256),), tokens=16, reps=2, group=64)
    shape = report["shapes"][0]
    assert (shape["C"], shape["K"]) == (64, 256) and 2.5 < shape["cmpq_avg_bits"] < 3.5
    assert all(shape[f"{v}_s"] > 0 for v in ("opt_int8", "int8", "awq", "cmpq"))
    # every part timed (no ordering between the timings: separate medians of microsecond calls on a shared host)
    assert shape["awq_dequant_s"] > 0 and shape["cmpq_dequant_s"] > 0
    rows = fig3.load_rows(store)
    assert set(rows["variant"]) == {"opt_int8", "int8", "awq", "cmpq"} and set(rows["shape"]) == {"64x256"}
    section = fig3.render(rows, paper_values.load_paper("fig3"), tmp_path / "figures")
    assert section.verdict in (rules.QUALITATIVE, rules.DIFFERS)  # never "reproduced" off the phone's NPU
    assert "2.59x" in section.body and "2.66x" in section.body and (tmp_path / "figures" / "fig3.png").is_file()


def test_ratios_pair_each_paper_statement_with_its_own_denominator():
    rows = [{"metric": "matmul_s", "status": "ok", "shape": "8x8", "variant": v, "value": t}
            for v, t in (("opt_int8", 1.0), ("int8", 3.0), ("awq", 2.0), ("cmpq", 4.0))]
    r = fig3.ratios(__import__("pandas").DataFrame(rows)).set_index(["variant", "versus"])["ratio"]
    assert r[("awq", "int8")] == 2.0 and r[("cmpq", "int8")] == 4.0 and r[("int8", "opt_int8")] == 3.0
