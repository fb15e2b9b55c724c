"""The paper's reference values: the CSVs load, and spot checks match paper-values.md (the team's transcription of
the paper's numbers, in the shared/ folder beside a checkout when it is there)."""
import re
from pathlib import Path

import pytest

from experiments import paper_values

MINE = ["fig10", "fig11", "fig12", "fig13", "fig4", "table3"]
PAPER_VALUES = Path(__file__).resolve().parents[3] / "shared" / "paper-values.md"


@pytest.mark.parametrize("name", MINE)
def test_paper_csv_loads_with_its_source(name):
    df = paper_values.load_paper(name)
    assert len(df) > 0
    assert "arXiv 2604.09083" in paper_values.paper_source(name)


def _value(name, **where):
    df = paper_values.load_paper(name)
    for k, v in where.items():
        df = df[df[k] == v]
    assert len(df) == 1, where
    return df.iloc[0]


def test_spot_checks():
    assert _value("fig10", system="llamacpp", bits=5, metric="ttft_ratio").value == 4.07
    assert _value("fig10", system="llmnpu", bits=4, metric="ttft_ratio").value == 1.63
    assert _value("fig10", bits=7, metric="accuracy_drop_pct").value == -0.03
    assert _value("fig12", model="phi3-3.8b", quantizer="cmpq", bits=5).value == 3.54
    assert _value("fig12", model="llama3-8b", quantizer="shadow_outlier", metric="accuracy_gain_pct_max").value == 63.13
    row = _value("table3", dataset="hellaswag")
    assert (row.shots, row.prompt_tokens_min, row.prompt_tokens_max) == (6, 883, 1086)
    assert _value("fig4", packing="kquant", metric="unpack_s").value == 5.53
    assert _value("fig13", versus="kquant", metric="unpack_speedup").value == 6.17


@pytest.mark.skipif(not PAPER_VALUES.exists(), reason="the cleaned paper values live outside the repository")
@pytest.mark.parametrize("name", MINE)
def test_every_value_appears_in_paper_values(name):
    text = PAPER_VALUES.read_text()
    numbers = set(re.findall(r"\d+(?:\.\d+)?", text))
    df = paper_values.load_paper(name)
    cols = [c for c in ("value", "shots", "prompt_tokens_min", "prompt_tokens_max") if c in df.columns]
    for col in cols:
        for v in df[col].dropna().abs():
            forms = {f"{v:g}", f"{v:.2f}", f"{v:.1f}", f"{v * 100:g}"}
            assert forms & numbers, f"{name}.{col}={v} not found in {PAPER_VALUES}"


def test_parse_paper_value():
    assert paper_values.parse_paper_value(">10k") == (10000.0, True)
    assert paper_values.parse_paper_value("814.51") == (814.51, False)
    assert paper_values.parse_paper_value(30.96) == (30.96, False)
