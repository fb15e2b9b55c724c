"""Each system's display name, colour and TTFT phase split are defined once, on the system (harness/systems/), and
every figure takes them from there."""
import ast
from pathlib import Path

import pytest

from experiments import fig1, fig10, lineup
from harness.systems import SYSTEMS
from harness.systems.base import TTFT_PHASES

NAMES = {"llama.cpp", "MNN", "llm.npu", "llm.npu+", "EdgeFlow", "EF"}
EXPERIMENTS = Path(fig10.__file__).parent


def test_every_system_has_a_name_and_a_colour_of_its_own():
    assert {n: (c.display, c.color) for n, c in SYSTEMS.items() if not (c.display and c.color)} == {}
    assert len({c.color for c in SYSTEMS.values()}) == len(SYSTEMS)
    assert lineup.label("edgeflow") == "EdgeFlow"
    assert lineup.label("edgeflow", short=True) == fig10.EF == "EF"  # the paper's abbreviation, from the system
    assert lineup.label("llamacpp", short=True) == lineup.label("llamacpp") == "llama.cpp"  # no `short`: its name
    assert lineup.label("unknown-engine") == "unknown-engine"


def test_the_lineup_is_the_systems_own_declarations():
    assert lineup.systems() == ("llamacpp", "llmnpu", "mnn", "edgeflow")  # peers by name, the proposed system last
    assert lineup.proposed() == "edgeflow" and lineup.peers() == ("llamacpp", "llmnpu", "mnn")
    assert lineup.budgets("edgeflow", (4, 5)) == (4, 5) and lineup.budgets("mnn", (4, 5)) == (None,)
    assert lineup.budget_overrides("edgeflow", 5) == ["quantizer=edgeflow", "quantizer.budget_bits=5.0",
                                                      "packing=weightlet"]
    assert lineup.budget_overrides("llamacpp", None) == []
    assert (lineup.stand_in("llamacpp"), lineup.stand_in("llmnpu")) == ("int8", "shadow_outlier")
    assert lineup.playing("llmnpu") == "llmnpu" and lineup.playing("a paper series nobody plays") is None
    with pytest.raises(ValueError, match=r"unknown system\(s\) \['nope'\]"):
        lineup.check(("mnn", "nope"), "fig10")


def test_own_rows_keep_the_proposed_systems_own_artifact_only():
    import pandas as pd

    rows = pd.DataFrame({"system": ["edgeflow", "edgeflow", "edgeflow", "edgeflow", "mnn", None],
                         "quantizer": ["edgeflow", "cmpq", None, "edgeflow", None, "edgeflow"],
                         "packing": ["weightlet", "weightlet", None, "mixed48", None, None],
                         "pipeline": [None, None, None, None, None, None]})
    assert lineup.own_rows(rows).tolist() == [True, False, True, False, True, True]
    assert lineup.is_proposed(rows).tolist() == [True, True, True, True, False, True]


FIGURES_A_NEW_ENGINE_REACHES = ("fig1.py", "fig2.py", "fig10.py", "fig15.py", "fig16.py")


@pytest.mark.parametrize("path", FIGURES_A_NEW_ENGINE_REACHES)
def test_no_figure_names_a_system(path):
    """A system's registry name as a string constant in a figure is a list or a special case a new engine would
    have to be added to; the one exception names the paper's series a statement is about (PAPER_PEER)."""
    tree = ast.parse((EXPERIMENTS / path).read_text())
    peer = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Assign)
            and any(getattr(t, "id", "") == "PAPER_PEER" for t in n.targets)}
    named = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value in SYSTEMS
             and id(n) not in peer]
    assert named == []


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
