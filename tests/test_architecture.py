"""docs/architecture.md's promise, checked: a toy quantizer, system and device are each their module plus their YAML,
and a toy figure is one module. Each toy is a file found where its kind is looked for (its package's path, a copy
of conf/), then used through the same entry points as the built-in ones, with nothing else edited."""
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# The toys live in temporary folders, visible to this process only (written()); the tests that read every source file
# (here and test_import_cycles.py) still share one xdist worker (test_the_xdist_group_is_applied checks the group).
pytestmark = pytest.mark.xdist_group("source-tree")

TOY_SYSTEM = '''
from dataclasses import dataclass

from harness.systems.base import NotRun, System, SystemConfig, register_system


@dataclass
class ArchToyConfig(SystemConfig):
    flavour: str = "plain"


@register_system
class ArchToy(System):
    name = "archtoy"
    config_type = ArchToyConfig

    def prepare(self, model, bits, device):
        raise NotRun("a toy")

    def run_cold(self, prepared, work, device, protocol):
        raise NotRun("a toy")
'''

TOY_ENGINE = '''
from harness.systems.base import NotRun, System, register_system


@register_system
class ArchToyEngine(System):
    """What the figures need of an engine, declared once (harness/systems/base.py)."""
    name, display, color = "archtoy", "Toy engine", "#17becf"
    stand_in = "int8"  # its INT8 weights' accuracy, beside it in Figure 10

    @classmethod
    def ttft_phases(cls, m):
        if "archtoy_prompt_eval_s" not in m:
            return None
        return {"load": m["ttft_s"] - m["archtoy_prompt_eval_s"], "prefill": m["archtoy_prompt_eval_s"]}

    def prepare(self, model, bits, device):
        raise NotRun("a toy")

    def run_cold(self, prepared, work, device, protocol):
        raise NotRun("a toy")
'''

TOY_DEVICE = '''
from harness.devices.base import register_device
from harness.devices.local import LocalDevice


@register_device
class ArchToyDevice(LocalDevice):
    name = "archtoy"
'''

TOY_QUANTIZER = '''
from harness.quant.base import register
from harness.quant.methods.uniform import UniformQuantizer


@register
class ArchToyQuantizer(UniformQuantizer):
    name = "archtoy"
'''

TOY_FIGURE = '''
from experiments.base import SweepArtifact, register_artifact
from experiments.output import Section


@register_artifact
class ArchToy(SweepArtifact):
    NAME, TITLE, EXPERIMENTS = "archtoy", "A toy figure", ("ttft",)

    @staticmethod
    def sweep(models=("smollm2-135m",)):
        return [["experiment=ttft", f"model={m}", "system=llamacpp"] for m in models]

    @staticmethod
    def render(rows, paper, figures_dir):
        return Section("archtoy", "A toy figure", "not run", f"{len(rows)} rows")
'''


@contextmanager
def written(files: dict[str, str], root: Path):
    """`files` (repository path -> text) made visible as if they were in the tree, for this process only: a module is
    written under `root` and its folder added to its package's search path; a YAML goes into a copy of conf/ that
    the registries and Hydra read. Nothing is written into the source tree, so tests running beside this one (which
    enumerate every system of conf/system/, say) never see a toy."""
    import importlib
    import shutil

    import harness.registry

    conf = root / "conf"
    shutil.copytree(REPO / "conf", conf)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(harness.registry, "CONF_DIR", conf)  # every reader of conf/ asks the registry (conf_group)
        for path, text in files.items():
            target = (conf / Path(path).relative_to("conf")) if path.startswith("conf/") else root / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
            if target.suffix == ".py":
                package = importlib.import_module(str(Path(path).parent).replace("/", "."))
                mp.setattr(package, "__path__", [*package.__path__, str(target.parent)])
        try:
            yield
        finally:
            for name in [m for m in sys.modules if m.endswith(".archtoy")]:
                del sys.modules[name]


def test_a_system_is_its_module_and_its_yaml(tmp_path):
    from harness.runner.job import prepare_job
    from harness.runner.sweep import compose_config
    from harness.systems import SYSTEMS, get_system

    files = {"harness/systems/archtoy.py": TOY_SYSTEM, "conf/system/archtoy.yaml": "name: archtoy\nthreads: 2\n"}
    try:
        with written(files, tmp_path):
            cfg = compose_config(["experiment=ttft", "system=archtoy", "+system.flavour=spicy"])
            prepare_job(cfg)  # every group validated, the toy's own key included
            system = get_system(cfg.system)
            assert system.cfg.flavour == "spicy"
            assert type(system).__module__ == "harness.systems.archtoy"  # found by its file, no list edited
    finally:
        SYSTEMS.pop("archtoy", None)


def _as_toy(rows: list[dict]) -> list[dict]:
    """llama.cpp's fixture rows again as the toy engine's: its own clocks renamed to the toy's, its TTFT and
    memory 1.2x llama.cpp's (so that neither hides the other in a picture)."""
    return [{**r, "system": "archtoy", "config_hash": f"archtoy-{r.get('config_hash')}",
             "metric": str(r["metric"]).replace("llamacpp_", "archtoy_"),
             "value": r["value"] * 1.2 if r["metric"] in ("ttft_s", "rss_mib", "peak_rss_mb") else r["value"]}
            for r in rows if r.get("system") == "llamacpp"]


def _figure_rows() -> dict[str, list[dict]]:
    """{figure: fixture rows with the toy engine's beside the built-in systems'} (tests/experiments' fixtures)."""
    helpers = str(Path(__file__).parent / "experiments")  # whose modules import pictures, synthetic_rows by bare name,
    if helpers not in sys.path:  # as pytest sets the path up only where it collects them (this test alone: not)
        sys.path.insert(0, helpers)
    from tests.experiments import synthetic_rows, test_fig1, test_fig1516, test_fig2

    fig1 = [r for system, m in test_fig1.ENGINE_METRICS.items() for rep in range(3)
            for r in test_fig1._rows(system, m, rep)]
    fig2 = [r for f, t in test_fig2.LLAMA.items() for r in test_fig2._rows(t, "llamacpp", f)]
    fig2 += test_fig2._rows(test_fig2.EDGEFLOW_COLD, "edgeflow", 0.0)
    fig10 = [r | {"experiment": e} for e, rows in synthetic_rows.fig10_rows().items() for r in rows]
    figures = {"fig1": fig1, "fig2": fig2, "fig10": fig10, "fig15": test_fig1516._completion_rows(),
               "fig16": test_fig1516._coldstart_rows()}
    return {name: rows + _as_toy(rows) for name, rows in figures.items()}


# what each figure says of the toy engine: compared where the figure compares, tabled where it tables
TOY_IN = {"fig1": "| Toy engine: share of the cold start outside prefill | 50% |",
          "fig2": "| Toy engine preloaded to match EdgeFlow 5b's cold TTFT (1.25 s) | 88% (123 MB) |",
          "fig10": "| Toy engine | – | one pool | none reported | token ids | – |",
          "fig15": "| smollm2-135m | EdgeFlow 5b | Toy engine | 1.19x |",
          "fig16": "| smollm2-135m | Toy engine | 1.08 [0.96–1.2] | 360 [360–360] |"}


DRAWN_IN_SYSTEM_COLOURS = ("fig2", "fig10", "fig16")


def test_a_new_engine_reaches_every_figure_by_its_module_and_its_yaml(tmp_path):
    """Issue 54: an engine declares its name, colour, phases and stand-in on its class; the figures read the lineup
    (experiments/lineup.py), so the toy is swept and drawn in Figures 1, 2, 10, 15 and 16 with nothing else edited."""
    from experiments import lineup, run
    from harness.runner.store import ResultsStore
    from harness.systems import SYSTEMS
    from tests.experiments.pictures import drawn_in

    files = {"harness/systems/archtoy.py": TOY_ENGINE, "conf/system/archtoy.yaml": "name: archtoy\nthreads: 2\n"}
    try:
        with written(files, tmp_path):
            assert "archtoy" in lineup.peers() and lineup.proposed() == "edgeflow"
            for name, rows in _figure_rows().items():
                assert any("system=archtoy" in p for p in run.points(name)), f"{name} does not sweep the toy"
                store = ResultsStore(tmp_path / name / "runs")
                for experiment in {r["experiment"] for r in rows}:
                    store.append(experiment, [r for r in rows if r["experiment"] == experiment])
                section = run.render(name, store, tmp_path / name)
                assert TOY_IN[name] in section.body.replace("smollm2-135m · local · device storage ", ""), name
                if name in DRAWN_IN_SYSTEM_COLOURS:  # (Figures 1 and 15 colour phases: their rows are per system)
                    assert drawn_in(section.figures[0], "#17becf"), f"{name}'s picture has no toy in its colour"
    finally:
        SYSTEMS.pop("archtoy", None)


def test_a_device_is_its_module_and_its_yaml(tmp_path):
    from harness.devices import DEVICES, get_device

    files = {"harness/devices/archtoy.py": TOY_DEVICE, "conf/device/archtoy.yaml": "name: archtoy\n"}
    try:
        with written(files, tmp_path):
            device = get_device({"name": "archtoy"})
            assert device.name == "archtoy" and type(device).__module__ == "harness.devices.archtoy"
    finally:
        DEVICES.pop("archtoy", None)


def test_a_quantizer_is_its_module_and_its_yaml(tmp_path):
    from harness.quant import REGISTRY, make_quantizer
    from harness.runner.sweep import compose_config

    files = {"harness/quant/methods/archtoy.py": TOY_QUANTIZER,
             "conf/quantizer/archtoy.yaml": "name: archtoy\nbudget_bits: 6\n"}
    try:
        with written(files, tmp_path):
            cfg = compose_config(["experiment=perplexity", "quantizer=archtoy"])
            quantizer = make_quantizer(cfg.quantizer)
            assert quantizer.name == "archtoy" and type(quantizer).__module__ == "harness.quant.methods.archtoy"
            # and it is in the quantizers' table (make compare-quantizers) with nothing else edited
            from experiments import compare_quantizers

            assert compare_quantizers.options()["archtoy"] == "archtoy"
            assert any("quantizer=archtoy" in point for point in compare_quantizers.sweep())
    finally:
        REGISTRY.pop("archtoy", None)


def test_a_soc_is_its_yaml(tmp_path):
    """A new Snapdragon is conf/npu/<name>.yaml alone: `npu=<name>` composes and validates with every other group,
    the npu kinds read it (npu_of), EdgeFlow's quantizer takes its NPU recipe there (harness/npu/recipe.py), and a
    wrong value in it is an error naming its key before any work starts."""
    from harness.npu.recipe import recipe_for
    from harness.config import ConfigError
    from harness.npu.config import load_npu_config, npu_of
    from harness.runner.job import prepare_job
    from harness.runner.sweep import compose_config

    toy = "name: archtoy\nsoc_model: 60\nhtp_arch: v73\nchipset: Toy Dragon\nactivation_bits: 16\n"
    with written({"conf/npu/archtoy.yaml": toy}, tmp_path):
        cfg = compose_config(["experiment=npu_oracle", "quantizer=edgeflow", "npu=archtoy"])
        quantizer = prepare_job(cfg).cfg.quantizer
        assert recipe_for("edgeflow") and all(quantizer[k] == v for k, v in recipe_for("edgeflow").items())
        npu = npu_of(cfg)
        assert (npu.soc_model, npu.htp_arch, npu.chipset, npu.activation_bits) == (60, "v73", "Toy Dragon", 16)
        assert load_npu_config("archtoy") == npu
    with written({"conf/npu/archtoy.yaml": toy.replace("v73", "73")}, tmp_path / "bad"):
        with pytest.raises(ConfigError, match="npu.htp_arch"):
            load_npu_config("archtoy")


def test_a_figure_is_one_module(tmp_path):
    from experiments import ARTIFACTS, run
    from harness.runner.store import ResultsStore

    files = {"experiments/archtoy.py": TOY_FIGURE}
    try:
        with written(files, tmp_path):
            assert run.points("archtoy", models=("a", "b"))[1][1] == "model=b"
            store = ResultsStore(tmp_path / "runs")
            store.append("ttft", [{"experiment": "ttft", "model": "a", "metric": "ttft_s", "value": 1.0, "status": "ok",
                                   "label": "measured"}])
            assert run.render("archtoy", store, tmp_path).summary == "1 rows"
    finally:
        ARTIFACTS.pop("archtoy", None)
    assert len(files) == 1


def test_the_config_tree_is_located_in_one_place():
    """harness.registry.CONF_DIR is where conf/ is; every other module asks conf_group() (a second spelling of the
    path is a reader the architecture tests' copy of conf/ would not reach)."""
    spelled = sorted(str(p.relative_to(REPO)) for folder in ("harness", "experiments")
                     for p in (REPO / folder).rglob("*.py") if '/ "conf"' in p.read_text())
    assert spelled == ["harness/registry.py"], spelled


def test_the_doc_names_every_plugin_registry():
    text = (REPO / "docs" / "architecture.md").read_text()
    for name in ("REGISTRY", "LAYOUTS", "SYSTEMS", "DEVICES", "ARTIFACTS"):
        assert name in text


def test_only_run_py_writes_edgeflow_run_arguments():
    """docs/architecture.md: harness/engine/run.py is the one place that writes edgeflow-run's arguments; a flag
    spelled anywhere else in the harness or the experiments is a second copy of the command line."""
    import re
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    flags = ("--policy", "--accel-threads", "--steal-threshold", "--io-threads", "--no-lane-help", "--repeat-prefill",
             "--profile-ops", "--no-verify", "--evict-cache", "--new-tokens", "--prompt-text", "--direct-io",
             "--buffered-io")
    pattern = re.compile("[\"'](" + "|".join(map(re.escape, flags)) + ")[\"']")
    found = [f"{p.relative_to(repo)}: {m.group(1)}" for folder in ("harness", "experiments")
             for p in sorted((repo / folder).rglob("*.py")) if p != repo / "harness/engine/run.py"
             for line in p.read_text().splitlines() if "add_argument(" not in line  # a tool's own flags
             for m in pattern.finditer(line)]
    assert not found, found


def test_the_xdist_group_is_applied(request):
    """Under `--dist loadgroup` a grouped test carries its group in its node id, which is how the scheduler keeps the
    group on one worker. pytest 9.2 with pytest-xdist 3.8 silently drops it (pytest-xdist issue 1386; pyproject.toml
    pins pytest below 9.2): the slurm tests would start a cluster per worker, and the toys above would come and go
    under the feet of the tests that read every source file."""
    if getattr(request.config.option, "loadgroup", False):
        assert request.node.nodeid.endswith("@source-tree"), (
            f"pytest {pytest.__version__} with this pytest-xdist does not apply xdist_group: {request.node.nodeid}")


def test_no_function_in_experiments_is_over_60_lines():
    """A renderer that grows past a screen is split by what it computes (issue 54: fig10.render was 165 lines)."""
    import ast

    long = [f"{path.name}:{node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for path in sorted((REPO / "experiments").glob("*.py"))
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 60]
    assert not long, long


def test_one_reader_of_the_cpu_facts():
    """/proc/cpuinfo is read in one place (harness/host.py: cpu_flags, cpu_model); the others ask it."""
    readers = sorted(str(p.relative_to(REPO)) for pkg in ("harness", "experiments") for p in (REPO / pkg).rglob("*.py")
                     if '"/proc/cpuinfo"' in p.read_text())
    assert readers == ["harness/host.py"], readers


def test_one_probe_of_the_cpu_in_the_engine():
    """The runtime asks CPUID / AT_HWCAP in one place (src/common/cpu_features.cpp); every kernel list reads it."""
    probes = ("__builtin_cpu_supports", "__get_cpuid", "getauxval")
    askers = sorted(str(p.relative_to(REPO)) for p in (REPO / "edgeflow_runtime").rglob("*.[ch]*")
                    if p.suffix in (".cpp", ".h") and any(x in p.read_text() for x in probes))
    assert askers == ["edgeflow_runtime/src/common/cpu_features.cpp"], askers
