"""The report: every artifact has a section; missing ones say how to run them; figures are embedded in the HTML."""
from experiments import ARTIFACTS, report, rules, selection
from harness.runner.store import LABELS, ResultsStore


def test_empty_store_marks_every_artifact_not_run(tmp_path):
    md_path, html_path = report.write(ResultsStore(tmp_path / "runs"), tmp_path / "out")
    md = md_path.read_text()
    for name, module in ARTIFACTS.items():
        assert f"## {module.TITLE}" in md
        assert f"make reproduce-{name}" in md
    assert md.count("**Verdict: not run**") == len(ARTIFACTS)
    assert "## Verdict rules" in md and md.count(rules.VERDICT_RULES) == 1  # the rules appear once
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


def test_the_scoreboard_is_on_top_and_counts_every_claim(fig10_store, tmp_path):
    md = report.write(fig10_store, tmp_path / "out")[0].read_text()
    head, rest = md.split("## Scoreboard", 1)
    assert "## " not in head.split("\n", 1)[1]  # the first section of the report
    count = next(line for line in rest.splitlines() if line.startswith("**Of "))
    # Figure 10's claims (9) and every other artifact's paper rows, none silently missing, counted by verdict
    total = int(count.split()[1])
    rows = [line for line in rest.split("## Summary")[0].splitlines() if line.startswith("| ") and "| # |" not in line]
    assert len(rows) == total
    assert sum(int(n) for n in __import__("re").findall(r"(\d+) (?:reproduced|qualitative|same direction|differs|"
                                                        r"inconclusive|not run)", count)) == total
    # the headline numbers first: 4.07x over llama.cpp and 2.40x over MNN at EdgeFlow's 5 bits
    assert "**headline** TTFT ratio llama.cpp / EF 5b" in rows[0] and "| 4.07 |" in rows[0]
    assert "**headline** TTFT ratio MNN / EF 5b" in rows[1] and "| 2.40 |" in rows[1]
    # what would make each stronger: an NPU for EdgeFlow's timings, a run for what did not run
    assert "EdgeFlow's accelerator half on an NPU" in rows[0]
    assert any("| not run | a run (`make reproduce-table4`)" in r for r in rows)
    assert all("table3" not in r for r in rows)  # Table 3's prompt lengths are an input, not a claim
    assert '<a id="fig10"></a>' in md and "[fig10](#fig10)" in rows[0]


def test_simulated_rows_name_their_simulator():
    import pandas as pd

    def rows(*metrics):
        return pd.DataFrame([{"metric": m, "label": "simulated", "device": "local", "flash_emulated_mbps": None,
                              "value": 0.1} for m in metrics])
    pipeline = "simulated: the pipeline simulator over this host's operator costs (not measured on a device)"
    assert pipeline in selection.labels(rows("sim_latency_s"))
    htp = [t for t in selection.labels(rows("kl_fp16_htp")) if t.startswith("simulated")]
    assert htp == ["simulated: QNN's HTP simulator (the accelerator's numerics) (not measured on a device)"]


def test_report_html_in_a_real_browser(fig10_store, tmp_path):
    """REPORT.html opened in headless Chromium, as most readers open it: the scoreboard on top, every figure loads,
    no link is dead; and a broken figure or a dead link is found."""
    import pytest

    from experiments import report_browser

    try:
        report_browser.browser()
    except report_browser.NoBrowser as e:
        pytest.skip(str(e))  # `make test` installs it (make system-deps)
    html_path = report.write(fig10_store, tmp_path / "out")[1]
    found = report_browser.open_in_browser(html_path)
    assert found["images"] >= 1 and report_browser.problems(found, html_path) == []
    broken = html_path.with_name("broken.html")
    broken.write_text(html_path.read_text().replace("data:image/png;base64,", "data:image/png;base64,AAAA", 1)
                      .replace("</body>", '<a href="#nowhere">x</a><a href="figures/missing.pdf">y</a></body>'))
    bad = report_browser.problems(report_browser.open_in_browser(broken), broken)
    assert any(b.startswith("figure does not load") for b in bad)
    assert "dead anchor: #nowhere" in bad and "dead link: figures/missing.pdf" in bad
