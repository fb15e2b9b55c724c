import pandas as pd

from harness.measure.summary import summary


def test_median_and_spread_per_configuration():
    base = {"system": "mnn", "model": "m", "bits": 8.0, "dataset": "prose", "prompt_tokens": 128, "status": "ok"}
    rows = [{**base, "config_hash": "a", "flash_emulated_mbps": None, "metric": "ttft_s", "value": v} for v in (1, 3, 2)]
    rows += [{**base, "config_hash": "b", "flash_emulated_mbps": 200.0, "metric": "ttft_s", "value": 5.0},
             {**base, "config_hash": "b", "flash_emulated_mbps": 200.0, "metric": "load_avg_1m", "value": 0.7},
             {**base, "config_hash": "c", "flash_emulated_mbps": 200.0, "metric": "ttft_s", "value": 99.0,
              "status": "failed"}]
    table = summary(pd.DataFrame(rows)).set_index("flash_emulated_mbps")
    assert table.loc[0.0, ["median", "min", "max", "count"]].tolist() == [2, 1, 3, 3]
    assert table.loc[200.0, "median"] == 5.0 and table.loc[200.0, "max_load"] == 0.7
