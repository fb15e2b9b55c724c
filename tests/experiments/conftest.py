"""Fixtures for the experiments tests; the synthetic rows themselves are built in synthetic_rows.py."""
import pytest

from harness.runner.store import ResultsStore
from synthetic_rows import fig10_rows


@pytest.fixture
def fig10_store(tmp_path) -> ResultsStore:
    store = ResultsStore(tmp_path / "runs")
    for experiment, rows in fig10_rows().items():
        store.append(experiment, rows)
    return store


@pytest.fixture
def bench_store(tmp_path) -> ResultsStore:
    """A store whose bench/ folder holds synthetic packing-benchmark output (see synthetic_rows.py)."""
    import json

    import pandas as pd

    from synthetic_rows import bench_csv_rows, bench_json

    store = ResultsStore(tmp_path / "runs")
    (store.root / "bench").mkdir(parents=True)
    pd.DataFrame(bench_csv_rows()).to_csv(store.root / "bench" / "unpack.csv", index=False)
    (store.root / "bench" / "unpack.json").write_text(json.dumps(bench_json()))
    return store
