"""Each system's display name, colour and TTFT phase split are defined once, on the system (harness/systems/), and
every figure takes them from there."""
import ast
from pathlib import Path

import pytest

from experiments import fig1, fig10, fig15, selection
from harness.systems import SYSTEMS
from harness.systems.base import TTFT_PHASES

NAMES = {"llama.cpp", "MNN", "llm.npu", "llm.npu+", "EdgeFlow", "EF"}
EXPERIMENTS = Path(fig10.__file__).parent


def test_every_system_has_a_name_and_a_colour_of_its_own():
    assert {n: (c.display, c.color) for n, c in SYSTEMS.items() if not (c.display and c.color)} == {}
    assert len({c.color for c in SYSTEMS.values()}) == len(SYSTEMS)
    assert fig15.DISPLAY["edgeflow"] == selection.system_label("edgeflow") == "EdgeFlow"
    assert fig10.DISPLAY["edgeflow"] == fig10.EF == "EF"  # the paper's abbreviation in Figure 10, also from the system
    assert fig10.DISPLAY["llamacpp"] == fig15.DISPLAY["llamacpp"] == "llama.cpp"
    assert selection.system_label("unknown-engine") == "unknown-engine"


@pytest.mark.parametrize("path", sorted(p.name for p in EXPERIMENTS.glob("*.py") if p.name != "table4.py"))
def test_no_figure_spells_a_system_name_itself(path):
    """String constants equal to a system's label mean a second definition (table4's are its quantizers' names)."""
    tree = ast.parse((EXPERIMENTS / path).read_text())
    spelled = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value in NAMES]
    assert spelled == []


def test_phase_splits_come_from_the_systems():
    m = {"ttft_s": 1.0, "edgeflow_ttft_s": 0.9, "edgeflow_setup_s": 0.1, "edgeflow_io_s": 0.2,
         "edgeflow_unpack_s": 0.05, "edgeflow_compute_s": 0.5, "edgeflow_idle_s": 0.05}
    parts = fig1.split("edgeflow", m)
    assert list(parts) == list(TTFT_PHASES) and parts["process start"] == pytest.approx(0.1)
    assert sum(parts.values()) == pytest.approx(1.0)
    llama = fig1.split("llamacpp", {"ttft_s": 1.0, "llamacpp_load_s": 0.7, "llamacpp_prompt_eval_s": 0.4})
    assert llama["load"] == pytest.approx(0.3) and llama["setup"] == pytest.approx(0.3) and llama["bubble"] == 0.0
    assert fig1.split("llmnpu", {"ttft_s": 1.0}) is None  # no clocks of its own: not split
    assert fig1.split("edgeflow", {"edgeflow_ttft_s": 0.9}) is None  # no wall clock: nothing to split
