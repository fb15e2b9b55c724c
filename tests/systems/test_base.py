import pytest

from harness.systems import NotRun, SystemConfig, get_system
from harness.systems.base import Measurement, Metric


def test_config_validation_names_the_key():
    with pytest.raises(ValueError, match="system.name"):
        SystemConfig(name="tensorrt")
    with pytest.raises(ValueError, match="system.threads"):
        SystemConfig(threads=0)
    with pytest.raises(ValueError, match="system.timeout_s"):
        SystemConfig(timeout_s=-1)


def test_a_known_but_absent_system_is_not_run():
    with pytest.raises(NotRun, match="edgeflow"):
        get_system({"name": "edgeflow"})


def test_measurement_summary_over_repetitions():
    m = Measurement("x", [[Metric("ttft_s", v, "s"), Metric("energy_j", None, "J", "no counter")] for v in (1.0, 3.0, 2.0)])
    assert m.summary()["median"] == 2.0
    with pytest.raises(KeyError, match="energy_j"):
        m.summary("energy_j")
