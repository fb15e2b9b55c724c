import pytest

from harness.systems import SystemConfig, get_system
from harness.systems.base import Measurement, Metric, rss_timeline


def test_config_validation_names_the_key():
    with pytest.raises(ValueError, match="system.name"):
        SystemConfig(name="tensorrt")
    with pytest.raises(ValueError, match="system.threads"):
        SystemConfig(threads=0)
    with pytest.raises(ValueError, match="system.timeout_s"):
        SystemConfig(timeout_s=-1)


def test_every_known_system_is_registered():
    from harness.systems.base import SYSTEM_NAMES

    assert {get_system({"name": name}).name for name in SYSTEM_NAMES} == set(SYSTEM_NAMES)


def test_measurement_summary_over_repetitions():
    m = Measurement("x", [[Metric("ttft_s", v, "s"), Metric("energy_j", None, "J", "no counter")] for v in (1.0, 3.0, 2.0)])
    assert m.summary()["median"] == 2.0
    with pytest.raises(KeyError, match="energy_j"):
        m.summary("energy_j")


def test_rss_timeline_is_thinned_and_keeps_the_last_sample():
    samples = [(i / 100, 1024 * i) for i in range(101)]
    text = rss_timeline(samples, points=10)
    assert text.startswith("rss timeline (s, MiB): [[0.0, 0.0], [0.1, 10.0]")
    assert text.endswith("[1.0, 100.0]]") and text.count("], [") == 10
    assert rss_timeline([]) == "rss timeline (s, MiB): []"
