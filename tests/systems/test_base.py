import pytest

from harness.systems import SystemConfig, get_system
from harness.systems.base import Measurement, Metric, thin


def test_config_validation_names_the_key():
    with pytest.raises(ValueError, match="system.name"):
        SystemConfig(name="tensorrt")
    with pytest.raises(ValueError, match="system.threads"):
        SystemConfig(threads=0)
    with pytest.raises(ValueError, match="system.timeout_s"):
        SystemConfig(timeout_s=-1)


def test_every_system_has_its_own_config_keys():
    from harness.config import ConfigError
    from harness.systems import SYSTEMS

    assert set(SYSTEMS) == {"llamacpp", "mnn", "llmnpu", "edgeflow"}
    assert get_system({"name": "llamacpp", "gguf_type": "Q6_K"}).cfg.gguf_type == "Q6_K"
    with pytest.raises(ConfigError, match=r"system: unknown key\(s\) \['gguf_type'\]"):
        get_system({"name": "mnn", "gguf_type": "Q6_K"})  # a llama.cpp key is no MNN key
    with pytest.raises(ConfigError, match="mnn_quant_block must be >= 0"):
        get_system({"name": "mnn", "mnn_quant_block": -1})
    assert get_system(SystemConfig(name="mnn", threads=3)).cfg.threads == 3  # the common keys carry over


def test_weight_bits_the_system_prepares_with():
    from omegaconf import OmegaConf

    assert get_system({"name": "llamacpp"}).weight_bits(8.0) == 8
    edgeflow = get_system({"name": "edgeflow"})
    edgeflow.configure(OmegaConf.create({"quantizer": {"name": "edgeflow", "budget_bits": 5.5}}))
    assert edgeflow.weight_bits(8) == 5.5  # its quantizer's budget, not experiment.extra.bits


def test_registry_refuses_a_second_owner_of_a_name_and_names_unknown_ones():
    from harness.registry import Registry, RegistryError

    reg = Registry("widget")

    @reg.register
    class A:
        name = "a"

    with pytest.raises(RegistryError, match="widget name 'a' is already registered"):
        reg.register(type("B", (), {"name": "a"}))
    assert reg.register(A) is A  # registering the same class again is harmless (re-imports)
    with pytest.raises(RegistryError, match="unknown widget 'c'; registered: a"):
        reg.lookup("c")


def test_measurement_summary_over_repetitions():
    m = Measurement("x", [[Metric("ttft_s", v, "s"), Metric("energy_j", None, "J", "no counter")] for v in (1.0, 3.0, 2.0)])
    assert m.summary()["median"] == 2.0
    with pytest.raises(KeyError, match="energy_j"):
        m.summary("energy_j")


def test_a_timeline_is_thinned_and_keeps_the_last_sample():
    samples = [(i / 100, 10.0 * i) for i in range(101)]
    thinned = thin(samples, points=10)
    assert thinned[:2] == ((0.0, 0.0), (0.1, 100.0)) and thinned[-1] == (1.0, 1000.0) and len(thinned) == 11
    assert thin([]) == ()
