"""Every artifact's sweep: well-formed Hydra overrides, and (for the groups present in conf/) composable."""
import re
from pathlib import Path

import pytest

from experiments import ARTIFACTS, fig10, run
from experiments.base import SweepArtifact
from harness.registry import CONF_DIR

SWEEPS = [name for name, a in ARTIFACTS.items() if isinstance(a, SweepArtifact)]


def _missing_options(point: list[str]) -> list[str]:
    """`group=option` overrides whose YAML is not in conf/."""
    missing = []
    for override in point:
        key, _, value = override.partition("=")
        if "." not in key and "/" not in key and not (Path(CONF_DIR) / key / f"{value}.yaml").exists():
            missing.append(override)
    return missing


def _one_per_shape(points: list[list[str]]) -> list[list[str]]:
    """One point per combination of the config groups it chooses (`group=option`) and the keys it sets: what
    composing can get wrong. Points differing only in a key's value (bits, windows) compose alike."""
    shapes = {}
    for point in points:
        shape = tuple(sorted(o if "." not in o.partition("=")[0] else o.partition("=")[0] for o in point))
        shapes.setdefault(shape, point)
    return list(shapes.values())


@pytest.mark.parametrize("name", SWEEPS)
def test_sweep_points_are_key_value_overrides(name):
    points = ARTIFACTS[name].sweep()
    assert points, f"{name}: empty sweep"
    for point in points:
        assert any(o.startswith("experiment=") for o in point)
        assert all("=" in o and "," not in o for o in point), point
        keys = [o.split("=")[0] for o in point]
        assert len(keys) == len(set(keys)), f"{name}: repeated key in {point}"
    assert len({tuple(p) for p in points}) == len(points), f"{name}: duplicate points"


@pytest.mark.parametrize("name", SWEEPS)
def test_sweep_composes_with_hydra(name):
    from harness.runner.sweep import compose_config

    points = ARTIFACTS[name].sweep(models=("smollm2-135m",))
    missing = sorted({o for p in points for o in _missing_options(p)})
    assert not missing, f"{name}'s sweep names config options that are not in conf/: {missing}"
    for point in _one_per_shape(points):
        cfg = compose_config(point)
        assert cfg.model.name == "smollm2-135m"


def test_one_point_per_shape_keeps_every_group_choice():
    points = [["experiment=ttft", "dataset=lambada", "quantizer.budget_bits=4"],
              ["experiment=ttft", "dataset=lambada", "quantizer.budget_bits=5"],
              ["experiment=ttft", "dataset=mmlu", "quantizer.budget_bits=4"]]
    assert _one_per_shape(points) == [points[0], points[2]]
    assert _missing_options(["experiment=ttft", "dataset=no-such-dataset", "quantizer.budget_bits=4"]) == [
        "dataset=no-such-dataset"]


def test_fig10_sweep_shape():
    points = fig10.sweep()
    # 5 datasets x (3 baselines + 4 EdgeFlow bit-widths) x (ttft, accuracy), + 5 datasets x 2 accuracy stand-ins,
    # + fidelity (once per model, not per dataset) of the 7 systems' weights and the 2 stand-ins
    assert len(points) == 5 * 7 * 2 + 5 * 2 + 7 + 2
    ef = [p for p in points if "system=edgeflow" in p]
    assert {o for p in ef for o in p if o.startswith("quantizer.budget_bits=")} == {
        f"quantizer.budget_bits={b:.1f}" for b in (4, 5, 6, 7)}
    baseline_ttft = [p for p in points if "system=llamacpp" in p and "experiment=ttft" in p]
    assert not any(o.startswith("quantizer") for p in baseline_ttft for o in p)  # llama.cpp brings its own Q8_0
    # an engine's accuracy is its own (no quantizer: not a fake-quant model under its name)
    assert not any(o.startswith("quantizer") for p in points if "system=llmnpu" in p for o in p)
    assert all("device=local" in p for p in points if "experiment=ttft" in p)


def test_fig10_sweep_parameters_narrow_it():
    mini = fig10.sweep(models=("smollm2-135m",), datasets=("lambada",), systems=("llamacpp", "edgeflow"), bits=(5,),
                       flash_mbps=200)
    assert len(mini) == 8  # ttft, accuracy and fidelity of each system; accuracy and fidelity of the INT8 stand-in
    assert all("device.flash_read_mbps=200.0" in p for p in mini if "experiment=ttft" in p)


def test_fig10_rejects_unknown_system():
    with pytest.raises(ValueError, match="unknown system"):
        fig10.sweep(systems=("vllm",))


def test_unknown_parameter_is_a_clear_error():
    with pytest.raises(run.SweepParameterError, match="table4's sweep takes"):
        run.points("table4", flash_mbps=200)


def test_cli_reports_a_bad_option_without_a_traceback(capsys):
    from experiments.__main__ import main

    assert main(["run", "table4", "--flash-mbps", "200", "--dry-run"]) == 2
    assert "table4's sweep takes" in capsys.readouterr().err


def test_shared_options_are_taken_where_the_sweep_has_them(capsys):
    """The Makefile passes every artifact the same options (MODELS, DATASETS, FLASH_MBPS, LAUNCHER): each takes those
    its sweep() has and names the others, instead of a Makefile line per artifact repeating its signature."""
    from experiments.__main__ import main

    assert main(["run", "table4", "--shared-options", "--flash-mbps", "200", "--models", "smollm2-135m",
                 "--dry-run"]) == 0
    out = capsys.readouterr()
    assert "table4: takes no flash_mbps; ignored" in out.err and "model=smollm2-135m" in out.out
    assert "device.flash_read_mbps" not in out.out


def test_the_makefile_names_no_system():
    """A sweep's systems come from the lineup (experiments/lineup.py) or base.baselines(), never a Makefile list."""
    from harness.systems.base import registered

    makefile = (Path(fig10.__file__).parents[1] / "Makefile").read_text()
    named = sorted({m for m in re.findall(r"system=([\w,]+)", makefile) for s in m.split(",") if s in registered()})
    assert named == []
    assert "--shared-options $(EXP_OPTIONS)" in makefile


def test_overrides_may_follow_the_options():
    """`make reproduce-X EXP_ARGS=...` puts Hydra overrides after the options; argparse alone would reject them."""
    from experiments.__main__ import parse

    args = parse(["run", "fig16", "experiment.repetitions=5", "--models", "smollm2-135m", "protocol.warmup_runs=0"])
    assert list(args.models) == ["smollm2-135m"]
    assert args.overrides == ["experiment.repetitions=5", "protocol.warmup_runs=0"]
    with pytest.raises(SystemExit):
        parse(["run", "fig16", "--models", "smollm2-135m", "--no-such-option"])
    with pytest.raises(SystemExit):
        parse(["report", "experiment.repetitions=5"])  # report takes no overrides
