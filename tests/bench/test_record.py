"""Benchmark rows go through the results store with their provenance, and the report's benchmarks section shows the
latest run of each benchmark (synthetic entries, no timing asserted)."""
import json
from types import SimpleNamespace

import pytest

from experiments import run
from harness.bench.record import BenchRecorder, cpu_info
from harness.runner.store import ResultsStore


class Entry(SimpleNamespace):
    def values(self, metric):
        return self.runs[metric]


def test_rows_carry_provenance_and_one_config_per_option_set(tmp_path):
    store = ResultsStore(tmp_path / "runs")
    rec = BenchRecorder("toy", {"reps": 2}, store)
    rec.add("gemm_gops", 123.0, "GOPS", system="edgeflow", variant="avx512-vnni", load=0.5)
    rec.save()
    row = store.read("bench-toy").iloc[0]
    assert row["status"] == "ok" and row["label"] == "measured" and row["git_commit"] and row["host"]
    assert row["load_avg_1m"] == 0.5 and json.loads(row["device_info"])["config"] == {"reps": 2}  # a column
    assert BenchRecorder("toy", {"reps": 2}, store).config_hash == rec.config_hash
    assert BenchRecorder("toy", {"reps": 3}, store).config_hash != rec.config_hash
    assert set(cpu_info()["simd"]) <= {"avx2", "avx_vnni", "avx512f", "avx512_vnni", "avx512_bf16", "asimd",
                                       "asimddp", "i8mm", "sve"}


def test_a_comparison_records_ttft_and_same_round_ratios(tmp_path):
    store = ResultsStore(tmp_path / "runs")
    ref = Entry(label="llama.cpp Q8_0", system=SimpleNamespace(name="llamacpp"),
                runs={"ttft_s": [1.0, 2.0], "load_avg_1m": [0.1, 0.2]})
    ours = Entry(label="edgeflow 5 bits", system=SimpleNamespace(name="edgeflow"),
                 runs={"ttft_s": [0.5, 0.5], "load_avg_1m": [0.1, 0.2]})
    rec = BenchRecorder("runtime", {}, store)
    rec.add_comparison([ref, ours], "llama.cpp Q8_0", prompt_tokens=128)
    rec.save()
    rows = store.read("bench-runtime")
    ratios = rows[rows["metric"] == "ttft_ratio"]
    assert list(ratios["value"]) == [0.5, 0.25] and set(ratios["variant"]) == {"edgeflow 5 bits"}
    assert len(rows[rows["metric"] == "ttft_s"]) == 4

    section = run.render("benchmarks", store, tmp_path / "out")
    assert "**bench-runtime** (" in section.body and "0.375 [0.25–0.5]" in section.body
    assert "**bench-quant**: not run" in section.body and section.verdict == "input"


def test_an_empty_store_says_how_to_run_them(tmp_path):
    section = run.render("benchmarks", ResultsStore(tmp_path / "runs"), tmp_path / "out")
    assert section.verdict == "not run" and "make reproduce-benchmarks" in section.body


@pytest.mark.native
def test_the_packing_benchmark_writes_through_the_store(tmp_path):
    from harness.bench.unpack import main

    main(["--bits", "5", "--reps", "1", "--no-callgrind", "--paths", "sse", "--results", str(tmp_path / "runs")])
    rows = ResultsStore(tmp_path / "runs").read("bench-unpack")
    assert {"cold_load_seconds", "unpack_seconds", "e2e_seconds"} <= set(rows["metric"])
    assert set(rows["packing"]) == {"weightlet", "mixed48", "kquant", "int8"} and (tmp_path / "runs" / "bench-unpack" / "unpack.json").exists()


def test_older_rows_get_their_load_average_from_the_notes(tmp_path):
    """Before load_avg_1m was a column, a benchmark row's notes said it ("...; load average 0.42")."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from harness.runner.store import COLUMNS

    folder = tmp_path / "runs" / "bench-old"
    folder.mkdir(parents=True)
    old = {k: v for k, v in COLUMNS.items() if k != "load_avg_1m"}
    pq.write_table(pa.Table.from_pylist([{"experiment": "bench-old", "metric": "gemm_gops", "value": 1.0,
                                          "status": "ok", "label": "measured", "notes": "avx2; load average 0.42"}],
                                        schema=pa.schema(list(old.items()))), folder / "part-0.parquet")
    assert ResultsStore(tmp_path / "runs").read("bench-old")["load_avg_1m"].iloc[0] == 0.42


def test_older_simulator_rows_say_their_prompt_came_from_the_corpus(tmp_path):
    """pipeline_sim replays a corpus prompt; its rows did not say so, and figures left them out as another condition
    ("builtin data") than the measured runs of the same prompt."""
    from harness.data.prompts import CORPUS_PROMPT_LABEL

    store = ResultsStore(tmp_path / "runs")
    store.append("pipeline", [{"metric": "sim_latency_s", "value": 1.0, "status": "ok", "label": "simulated"},
                              {"metric": "ttft_s", "value": 1.0, "status": "ok", "label": "measured"}])
    rows = store.read("pipeline").set_index("metric")
    assert rows.loc["sim_latency_s", "prompt_source"] == CORPUS_PROMPT_LABEL
    assert rows["prompt_source"].isna().sum() == 1  # a measured row without a source is not guessed at
