import pytest
from hydra.errors import MissingConfigException

from harness.config import ConfigError
from harness.runner.job import prepare_job
from harness.runner.sweep import compose_config


def test_default_config_is_valid():
    job = prepare_job(compose_config([]))
    assert job.model.name == "smollm2-135m"
    assert len(job.config_hash) == 16


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["experiment.kind=bogus"], "experiment.kind must be one of"),
        (["experiment.repetitions=0"], "experiment.repetitions must be >= 1"),
        (["+experiment.colour=red"], r"experiment: unknown key\(s\) \['colour'\]"),
        (["model.source=ftp"], "model.source must be"),
    ],
)
def test_bad_values_name_the_key(overrides, message):
    with pytest.raises(ConfigError, match=message):
        prepare_job(compose_config(overrides))


def test_unknown_group_option_is_rejected_with_the_options():
    with pytest.raises(MissingConfigException, match="smollm2-135m"):
        compose_config(["model=gpt-17"])


def test_run_control_keys_do_not_change_the_config_hash():
    a = prepare_job(compose_config([])).config_hash
    b = prepare_job(compose_config(["run.resume=false"])).config_hash
    c = prepare_job(compose_config(["experiment.eval_limit=7"])).config_hash
    assert a == b != c


def test_a_numerics_change_changes_every_configurations_identity(monkeypatch):
    """The same YAML under other numerics (a changed definition or default) is another measurement: a resumed
    sweep must not say "already measured" over rows of the old numerics."""
    from harness.runner import identity

    before = prepare_job(compose_config([])).config_hash
    monkeypatch.setattr(identity, "numerics_digest", lambda: "another definition")
    assert prepare_job(compose_config([])).config_hash != before


def test_the_numerics_digest_covers_the_quantizers_defaults(monkeypatch):
    """A default that a YAML leaves out (the output grid's headroom) is part of what computes the numbers."""
    import dataclasses

    from harness.quant import config
    from harness.runner import identity

    @dataclasses.dataclass
    class WiderGrids(config.QuantizerConfig):
        output_headroom: float = 2.0

    identity.numerics_digest.cache_clear()
    before = identity.numerics_digest()
    monkeypatch.setattr(config, "QuantizerConfig", WiderGrids)
    identity.numerics_digest.cache_clear()
    try:
        assert identity.numerics_digest() != before
    finally:
        identity.numerics_digest.cache_clear()
