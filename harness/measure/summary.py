"""`python -m harness.measure.summary [EXPERIMENT] [METRIC]`: median and spread of a metric over repetitions, per
system, prompt set, prompt length and flash setting, from the results store (default: ttft, ttft_s)."""
from __future__ import annotations

import sys

from harness.runner.store import OK, ResultsStore

KEYS = ["system", "model", "bits", "dataset", "prompt_tokens", "flash_emulated_mbps"]


def summary(df, metric: str = "ttft_s"):
    rows = df[(df.metric == metric) & (df.status == OK)].copy()
    rows["flash_emulated_mbps"] = rows["flash_emulated_mbps"].fillna(0)  # 0 = native in this table
    loads = df[(df.metric == "load_avg_1m") & (df.status == OK)].groupby("config_hash")["value"].max()
    rows["max_load"] = rows["config_hash"].map(loads)
    g = rows.groupby(KEYS, dropna=False)
    return g["value"].agg(["median", "min", "max", "count"]).join(g["max_load"].max()).reset_index()


if __name__ == "__main__":
    experiment, metric = (sys.argv[1:] + ["ttft", "ttft_s"][len(sys.argv[1:]):])[:2]
    print(summary(ResultsStore().read(experiment), metric).to_string(index=False, float_format=lambda v: f"{v:.3f}"))
