"""The report: every artifact has a section; missing ones say how to run them; figures are embedded in the HTML."""
from experiments import ARTIFACTS, common, report
from harness.runner.store import LABELS, ResultsStore


def test_empty_store_marks_every_artifact_not_run(tmp_path):
    md_path, html_path = report.write(ResultsStore(tmp_path / "runs"), tmp_path / "out")
    md = md_path.read_text()
    for name, module in ARTIFACTS.items():
        assert f"## {module.TITLE}" in md
        assert f"make reproduce-{name}" in md
    assert md.count("**Verdict: not run**") == len(ARTIFACTS)
    assert "## Verdict rules" in md and md.count(common.VERDICT_RULES) == 1  # the rules appear once
    header = md.split("## Summary")[0]
    for label, meaning in LABELS.items():  # the header says what every label of the one vocabulary covers
        assert f"- *{label}*: {meaning}" in header
    assert "<table>" in html_path.read_text()


def test_report_with_fig10_rows(fig10_store, tmp_path):
    md_path, html_path = report.write(fig10_store, tmp_path / "out")
    md = md_path.read_text()
    assert "**Verdict: qualitative**" in md and "**Verdict: input**" in md
    assert "](figures/fig10.png)" in md and (tmp_path / "out" / "figures" / "fig10.png").exists()
    assert 'src="data:image/png;base64,' in html_path.read_text()
    assert "**Verdict: not run** — no perplexity rows" in md


def test_simulated_rows_name_their_simulator():
    import pandas as pd

    def rows(*metrics):
        return pd.DataFrame([{"metric": m, "label": "simulated", "device": "local", "flash_emulated_mbps": None,
                              "value": 0.1} for m in metrics])
    pipeline = "simulated: the pipeline simulator over this host's operator costs (not measured on a device)"
    assert pipeline in common.labels(rows("sim_latency_s"))
    htp = [t for t in common.labels(rows("kl_fp16_htp")) if t.startswith("simulated")]
    assert htp == ["simulated: QNN's HTP simulator (the accelerator's numerics) (not measured on a device)"]
