"""Table 3: the datasets and the prompt lengths (tokens) their multi-shot prompts reach, which drive TTFT.

Ours: the band of `prompt_tokens` over the TTFT rows of each model and dataset (the prompts the systems actually
prefilled, counted by the model's tokenizer). The sweep measures them through llama.cpp's TTFT points, which Figure 10
shares: a store that already holds Figure 10 skips them.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from experiments import common, fig10
from experiments.common import Section, md_table

NAME = "table3"
TITLE = "Table 3 - datasets and prompt lengths"
EXPERIMENTS = ("ttft",)


def sweep(models=("smollm2-135m",), datasets=fig10.DATASETS, device="local") -> list[list[str]]:
    return fig10.sweep(models=models, datasets=datasets, systems=("llamacpp",), device=device, kinds=("ttft",))


def band_verdict(lo: int, hi: int, paper_lo: int, paper_hi: int, tol: float = common.BAND_TOLERANCE) -> str:
    inside = lo >= paper_lo * (1 - tol) and hi <= paper_hi * (1 + tol)
    return common.REPRODUCED if inside else common.DIFFERS


def render(rows: pd.DataFrame, paper: pd.DataFrame | None, figures_dir: Path) -> Section:
    ok = rows[(rows["status"] == "ok") & rows["prompt_tokens"].notna()]
    if ok.empty:
        return common.not_run_section(NAME, TITLE, "no TTFT rows with prompt lengths in the store")
    ours = ok.groupby(["model", "dataset"])["prompt_tokens"].agg(["min", "max", "count"]).reset_index()
    lines, verdicts = [], []
    for r in ours.itertuples():
        p = paper[paper["dataset"] == r.dataset] if paper is not None else pd.DataFrame()
        if p.empty:
            lines.append({"model": r.model, "dataset": r.dataset, "ours (tokens)": f"{r.min}–{r.max}",
                          "prompts": r.count, "paper shots": "–", "paper (tokens)": "–", "verdict": "no paper value"})
            continue
        p = p.iloc[0]
        v = band_verdict(r.min, r.max, p.prompt_tokens_min, p.prompt_tokens_max)
        verdicts.append(v)
        lines.append({"model": r.model, "dataset": r.dataset, "ours (tokens)": f"{r.min}–{r.max}",
                      "prompts": r.count, "paper shots": int(p.shots),
                      "paper (tokens)": f"{p.prompt_tokens_min}–{p.prompt_tokens_max}", "verdict": v})
    verdict, count = common.overall(verdicts)
    body = ("Our prompt lengths are counted by each model's own tokenizer; the paper's by Llama3-8B's and "
            "Phi3-3.8B's. `prompts` counts TTFT rows (one per repetition and prompt).\n\n" + md_table(pd.DataFrame(lines)))
    return Section(NAME, TITLE, verdict, count, body)
