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
