"""Figure 10's side tables from synthetic rows: MNN's ratio without its `import MNN`, and quality against FP16."""
import pandas as pd

from experiments import fig10
from harness.runner.store import COLUMNS
from tests.experiments.synthetic_rows import _row


def _mnn_and_ef_rows(import_s: float = 0.5) -> pd.DataFrame:
    rows = []
    for dataset in ("lambada", "hellaswag", "mmlu"):
        for prompt in range(3):
            for rep in range(3):
                workload = f'{{"tokens_sha256_12": "{dataset}{prompt}"}}'
                for system, bits, ttft in (("mnn", None, 2.0), ("edgeflow", 5.0, 1.0)):
                    q = ("edgeflow", "weightlet") if system == "edgeflow" else (None, None)
                    common = dict(system=system, bits=bits, quantizer=q[0], packing=q[1], dataset=dataset,
                                  repetition=rep, workload=workload,
                                  label="measured", notes="prompt (corpus text (local)); synthetic")
                    rows.append(_row(metric="ttft_s", value=ttft, unit="s", **common))
                    if system == "mnn":
                        rows.append(_row(metric="mnn_import_s", value=import_s, unit="s", **common))
    return fig10.selection.with_conditions(fig10._with_series(pd.DataFrame(rows)))


def test_mnn_ratio_without_its_import_subtracts_each_runs_own():
    table = fig10.startup_table(_mnn_and_ef_rows(import_s=0.5))  # MNN declares startup_metric = "mnn_import_s"
    assert len(table) == 1 and table.iloc[0]["EF bits"] == "5" and table.iloc[0]["system"] == "MNN"
    assert table.iloc[0]["ratio over EF, as measured [95%]"].startswith("2 ")
    assert table.iloc[0]["without the start-up [95%]"].startswith("1.5 ")  # (2.0 - 0.5) / 1.0
    assert table.iloc[0]["start-up"] == "mnn_import_s"
    assert table.iloc[0]["start-up, median over its runs (s)"] == "0.5"


def test_no_import_rows_no_table():
    rows = _mnn_and_ef_rows()
    assert fig10.startup_table(rows[rows["metric"] != "mnn_import_s"]).empty


def test_quality_table_gives_each_engine_its_own_kl_with_an_interval():
    rows = []
    for w, jitter in enumerate((0.0, 0.002, -0.002, 0.0)):
        rows += [_row(system="llamacpp", metric="kl_fp16_runtime", value=0.005 + jitter, repetition=w),
                 _row(system="edgeflow", bits=5.0, quantizer="edgeflow", packing="weightlet",
                      metric="kl_fp16_runtime", value=0.1 + jitter, repetition=w),
                 _row(system="edgeflow", bits=5.0, quantizer="edgeflow", packing="weightlet",
                      metric="kl_fp16_weight_only", value=0.03 + jitter, repetition=w),
                 # a stand-in's "_runtime" rows are our runtime over its weights: not an engine's, left out
                 _row(system=None, bits=8.0, quantizer="uniform", metric="kl_fp16_runtime", value=0.2, repetition=w),
                 _row(system=None, bits=8.0, quantizer="uniform", metric="kl_fp16", value=0.13, repetition=w)]
    table = fig10.quality_table(fig10._with_series(pd.DataFrame(rows))).set_index("series")
    assert list(table.index) == ["llama.cpp", "stand-in (fake-quant INT8)", "EF 5b"]
    assert table.loc["llama.cpp", "KL by the engine"].startswith("0.005 [")
    assert table.loc["EF 5b", "KL fake-quant, weights only"].startswith("0.03 [")
    assert table.loc["stand-in (fake-quant INT8)", "KL by the engine"] == "–"
    assert table.loc["stand-in (fake-quant INT8)", "KL fake-quant"].startswith("0.13")
    assert (table["windows"] == 4).all()


def test_quality_table_never_pools_two_texts():
    rows = [_row(system="llamacpp", quantizer=None, bits=None, packing=None, metric="kl_fp16_runtime", value=v,
                 repetition=w, dataset=text) for text, v in (("ppl-local", 0.01), ("python-docs", 0.05)) for w in range(4)]
    table = fig10.quality_table(fig10._with_series(pd.DataFrame(rows))).set_index("text")
    assert table.loc["ppl-local", "KL by the engine"].startswith("0.01 ")
    assert table.loc["python-docs", "KL by the engine"].startswith("0.05 ")
    assert (table["windows"] == 4).all()  # not 8 windows of one pooled mean (0.03)


def test_work_table_says_how_each_system_got_its_prompt_and_threads():
    rows = _mnn_and_ef_rows()
    rows["workload"] = '{"threads": 2, "ctx": 256}'
    extra = [dict(rows[rows["series"] == "EF 5b"].iloc[0]) | {"metric": m, "value": v}
             for m, v in (("edgeflow_io_threads", 1), ("edgeflow_unpack_threads", 0), ("edgeflow_cpu_threads", 1),
                          ("edgeflow_accel_threads", 1), ("tokens_match", 1.0), ("tokens_match", 0.0))]
    table = fig10.work_table(pd.concat([rows, pd.DataFrame(extra)], ignore_index=True)).set_index("series")
    assert table.loc["EF 5b", "compute threads"] == "2" and table.loc["EF 5b", "lanes"] == "1 cpu + 1 accel"
    assert table.loc["EF 5b", "threads outside the budget"] == "1 I/O"  # unpacking runs on the compute threads
    older = pd.concat([rows, pd.DataFrame(extra)], ignore_index=True)
    older.loc[older["metric"] == "edgeflow_unpack_threads", "value"] = 1  # a store from before: an unpack thread
    assert fig10.work_table(older).set_index("series").loc["EF 5b", "threads outside the budget"] == "1 I/O + 1 unpack"
    assert table.loc["EF 5b", "same ids as the workload"] == "50% of 2 runs"
    assert table.loc["MNN", "prompt"] == "token ids" and table.loc["MNN", "threads outside the budget"] == "none reported"


def test_accuracies_over_different_item_counts_are_not_pooled():
    rows = pd.DataFrame([_row(system="llamacpp", quantizer=None, packing=None, bits=None, dataset="lambada",
                              metric="accuracy", value=v, label="proxy", prompt_tokens=None, part=n, error=None,
                              config_hash=f"h{n}", items=n, notes="proxy; lm-eval task lambada-local metric acc")
                         for v, n in ((0.20, 50), (0.25, 100))])
    acc = fig10.tidy(rows).accuracy.set_index("series")
    assert acc.loc["llama.cpp", "median"] == 0.25 and acc.loc["llama.cpp", "items"] == 100


def _paired_rows(llama_match=lambda dataset, prompt, rep: 1.0) -> pd.DataFrame:
    """llama.cpp (2 s), EdgeFlow 5b (1 s) and llm.npu+ (3 s; its demo runs its own prompt) on MMLU and HellaSwag,
    3 prompts x 3 repetitions; llama.cpp's tokens_match per run from `llama_match`."""
    rows = []
    for dataset in ("mmlu", "hellaswag"):
        for prompt in range(3):
            for rep in range(3):
                workload = (f'{{"tokens_sha256_12": "{dataset}{prompt}", "ctx": 1024, "threads": 2, '
                            '"timed_event": "first_token", "cold": "evicted+verified"}')
                for system, bits, ttft in (("llamacpp", None, 2.0), ("edgeflow", 5.0, 1.0), ("llmnpu", None, 3.0)):
                    q = ("edgeflow", "weightlet") if system == "edgeflow" else (None, None)
                    work = ("not the given workload: the engine runs its own prompt" if system == "llmnpu"
                            else workload)
                    common = dict(system=system, bits=bits, quantizer=q[0], packing=q[1], dataset=dataset,
                                  repetition=rep, workload=work, label="measured", experiment="ttft",
                                  prompt_index=prompt, prompt_source="corpus text (local)", notes="synthetic")
                    rows.append(_row(metric="ttft_s", value=ttft, unit="s", **common))
                    if system == "llamacpp":
                        rows.append(_row(metric="tokens_match", value=llama_match(dataset, prompt, rep), **common))
    rows.sort(key=lambda r: r["config_hash"])  # a configuration's rows are one attempt, as a job appends them
    return pd.DataFrame(rows, columns=list(COLUMNS))  # every column of a store's rows


def test_rows_that_did_other_work_are_drawn_but_never_paired():
    t = fig10.tidy(_paired_rows())
    assert "llm.npu+" in set(t.ttft_all["series"]) and "llm.npu+" not in set(t.ttft["series"])
    assert t.different_work["llm.npu+"].startswith("different work: the engine ran its own prompt")
    assert fig10.llmnpu_statements(t) == []  # no llm.npu+ / EdgeFlow ratio from other work
    ours = fig10.ratios(t.ttft, t.ttft_rows).set_index("system")
    assert list(ours.index) == ["llamacpp"] and ours.loc["llamacpp", "ratio"] == 2.0


def test_a_run_whose_engine_saw_other_ids_is_left_out_of_the_ratio():
    # llama.cpp tokenized prompt 0 of MMLU to other ids in every repetition; slower there: it must not count
    rows = _paired_rows(llama_match=lambda dataset, prompt, rep: 0.0 if (dataset, prompt) == ("mmlu", 0) else 1.0)
    rows.loc[(rows["system"] == "llamacpp") & (rows["dataset"] == "mmlu") & rows["notes"].str.startswith("prompt 0")
             & (rows["metric"] == "ttft_s"), "value"] = 50.0
    t = fig10.tidy(rows)
    assert t.different_work["llama.cpp"].startswith("different work: the engine tokenized the prompt text")
    assert len(t.ttft_rows[t.ttft_rows["series"] == "llama.cpp"]) == 2 * 9 - 3
    assert fig10.ratios(t.ttft, t.ttft_rows).set_index("system").loc["llamacpp", "ratio"] == 2.0
