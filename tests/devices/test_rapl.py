"""The host's energy counter: RAPL package domains under a powercap tree (a fake one here), summed and unwrapped;
otherwise a reason that names what was checked."""
import os

import pytest

from harness.devices.local import rapl_energy


def _zone(root, name, uj, max_uj=1000_000):
    d = root / name
    d.mkdir(parents=True)
    (d / "energy_uj").write_text(f"{uj}\n")
    (d / "max_energy_range_uj").write_text(f"{max_uj}\n")
    return d / "energy_uj"


def test_packages_are_summed_and_wraps_unwrapped(tmp_path):
    a = _zone(tmp_path, "intel-rapl:0", 900_000)
    b = _zone(tmp_path, "intel-rapl:1", 10)
    _zone(tmp_path, "intel-rapl:0:0", 5)  # a sub-domain (core) of package 0: not counted again
    counter, reason = rapl_energy(tmp_path)
    assert reason is None and [f.name for f in counter.files] == ["energy_uj", "energy_uj"]
    assert counter() == 0.0
    a.write_text("200000\n")  # wrapped at 1,000,000 uJ: +300,000
    b.write_text("100010\n")  # +100,000
    assert counter() == pytest.approx(0.4)
    a.write_text("250000\n")
    assert counter() == pytest.approx(0.45)


def test_amd_domains_count(tmp_path):
    _zone(tmp_path, "amd-rapl:0", 1)
    counter, reason = rapl_energy(tmp_path)
    assert reason is None and counter() == 0.0


@pytest.mark.parametrize("setup,expected", [
    (lambda root: None, "does not exist"),
    (lambda root: root.mkdir(), "no package domain"),
])
def test_no_counter_says_what_was_checked(tmp_path, setup, expected):
    root = tmp_path / "powercap"
    setup(root)
    counter, reason = rapl_energy(root)
    assert counter is None
    assert reason.startswith("no readable energy counter on this host") and expected in reason
    assert f"{root}/intel-rapl:*/energy_uj" in reason


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_unreadable_counter(tmp_path):
    f = _zone(tmp_path, "intel-rapl:0", 1)
    f.chmod(0)
    counter, reason = rapl_energy(tmp_path)
    assert counter is None and "not readable" in reason
