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
    """A store holding synthetic packing-benchmark output (see synthetic_rows.py) where harness/bench/unpack.py writes
    it: rows of experiment bench-unpack, and unpack.json beside them."""
    import json

    from synthetic_rows import bench_json, bench_store_rows

    store = ResultsStore(tmp_path / "runs")
    store.append("bench-unpack", bench_store_rows())
    (store.root / "bench-unpack" / "unpack.json").write_text(json.dumps(bench_json()))
    return store
