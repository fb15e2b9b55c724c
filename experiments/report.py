"""results/REPORT.md and results/REPORT.html: every artifact's numbers beside the paper's, with a verdict.

The Markdown links the figures (figures/<name>.png, relative to results/); the HTML is the same text rendered with
the PNGs embedded, so it is one self-contained file to send around.
"""
from __future__ import annotations

import base64
import html
import os
import re
import traceback
from pathlib import Path

import pandas as pd

from experiments import ARTIFACTS, output, paper_values, rules, run
from experiments.output import Section
from harness.runner import provenance
from harness.runner.store import LABELS, ResultsStore


def sections(store: ResultsStore, out_dir: Path) -> list[Section]:
    """Render every artifact; a renderer that crashes becomes a section saying so (the others still render)."""
    out = []
    for name, artifact in ARTIFACTS.items():
        try:
            out.append(run.render(name, store, out_dir))
        except Exception as e:  # a bug in one renderer must not hide the other artifacts' results
            tail = traceback.format_exc(limit=2)
            out.append(Section(name, artifact.TITLE, "render failed", f"{type(e).__name__}: {e}",
                               f"```\n{tail}\n```\n"))
    return out


def scoreboard(secs: list[Section]) -> tuple[str, str]:
    """(the one-line count, the Markdown table): every claim of the paper the artifacts compare, the abstract's and
    section 5's headline numbers first, each with the paper's value, ours, the verdict and what would make it
    stronger."""
    claims = [c for s in secs for c in s.claims]
    claims = [c for c in claims if c.headline] + [c for c in claims if not c.headline]
    counts = {v: sum(c.verdict == v for c in claims) for v in rules.VERDICTS}
    line = (f"Of {len(claims)} claims of the paper, " + ", ".join(f"{n} {v}" for v, n in counts.items() if n)
            + f" (measured on host `{provenance.host()}`).")
    table = output.md_table(pd.DataFrame(
        [{"#": i, "claim": ("**headline** " if c.headline else "") + c.statement,
          "artifact": f"[{c.artifact}](#{c.artifact})", "paper": c.paper, "ours": c.ours, "verdict": c.verdict,
          "stronger with": c.stronger()} for i, c in enumerate(claims, 1)]))
    return line, table


def markdown(secs: list[Section], store: ResultsStore) -> str:
    count, board = scoreboard(secs)
    summary = output.md_table(pd.DataFrame(
        [{"artifact": s.name, "what": s.title.split(" - ", 1)[-1], "verdict": s.verdict, "why": s.summary,
          "measured on": s.context or "–", "reproduce": f"`make reproduce-{s.name}`"} for s in secs]))
    head = [
        "# EdgeFlow-Bench: our measurements beside the paper's",
        "",
        f"Generated {provenance.now()} from the results store `{store.root}` at commit `{provenance.git_commit()}` "
        f"on host `{provenance.host()}`. Paper: *EdgeFlow: Fast Cold Starts for LLMs on Mobile Devices* "
        "(arXiv 2604.09083v1), measured on a Xiaomi 15 Pro (Snapdragon 8 Elite). Paper values are read from "
        "`results/paper/*.csv`; each file names its source section.",
        "",
        "## Scoreboard",
        "",
        f"**{count}**",
        "",
        "Every quantitative claim of the paper, one row each, the verdict by the rules below; *stronger with* says "
        "what would have to change for a stronger verdict.",
        "",
        board,
        "Every number of ours carries one label, repeated beside each figure:",
        "",
        *(f"- *{label}*: {meaning}" for label, meaning in LABELS.items()),
        "",
        "## Summary",
        "",
        summary,
        "## Verdict rules",
        "",
        rules.VERDICT_RULES,
        "",
    ]
    body = []
    for s in secs:
        body += [f'<a id="{s.name}"></a>', "", f"## {s.title}", "", f"**Verdict: {s.verdict}** — {s.summary}.", "",
                 s.body.strip(), ""]
        paper = paper_values.load_paper(s.name)
        if s.verdict == rules.NOT_RUN and paper is not None and "paper" not in s.body.lower():
            body += ["The paper's values, for when it runs:", "", output.md_table(paper)]
        body += [f"_Paper source_: {paper_values.paper_source(s.name)}", ""]
    return "\n".join(head + body) + "\n"


def to_html(md: str, out_dir: Path) -> str:
    """The Markdown as one HTML page with the PNG figures inlined (data URIs)."""
    from markdown_it import MarkdownIt

    page = MarkdownIt("commonmark").enable("table").render(md)

    def inline(m: re.Match) -> str:
        path = out_dir / html.unescape(m.group(1))
        if not path.exists():
            return m.group(0)
        return f'src="data:image/png;base64,{base64.b64encode(path.read_bytes()).decode()}"'

    page = re.sub(r'src="([^"]+\.png)"', inline, page)
    style = ("body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;line-height:1.45}"
             "table{border-collapse:collapse;font-size:0.85em;margin:0.6em 0}"
             "td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}img{max-width:100%}"
             "code{background:#f4f4f4}")
    return (f"<!doctype html>\n<html><head><meta charset='utf-8'><title>EdgeFlow-Bench report</title>"
            f"<style>{style}</style></head><body>\n{page}</body></html>\n")


def write(store: ResultsStore | None = None, out_dir: Path = run.RESULTS_DIR) -> tuple[Path, Path]:
    store = store or ResultsStore()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    md = markdown(sections(store, out_dir), store)
    paths = (out_dir / "REPORT.md", out_dir / "REPORT.html")
    for path, text in zip(paths, (md, to_html(md, out_dir))):
        tmp = path.with_name(f".tmp-{os.getpid()}-{path.name}")
        tmp.write_text(text)
        os.replace(tmp, path)
    return paths
