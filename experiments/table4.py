"""Table 4: WikiText-2 perplexity of Llama3-8B quantized by SmoothQuant, llm.npu's shadow outliers (SO), CMPQ and
EdgeFlow at 4-7 average bits. Table 5 is the same for Phi3-3.8B (experiments/table5.py reuses this module).
Qualcomm's AIMET, which the paper does not compare, is measured at the one budget of the range it takes (4 bits) and
shown beside them, outside every verdict (EXTRA).

Ours: `perplexity` rows (metric perplexity), median over repetitions, one table per model and evaluation text
(WikiText-2 or the local proxy: never pooled). When the store holds the paper's own model its
rows are compared; otherwise every model we measured is compared with the paper's table, by ordering only (absolute
perplexities of different models and protocols are not comparable). The reference CSV is the quantizer helper's
results/paper/table4.csv (long format with metric/value, or wide with one column per method: both are read).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from experiments import output, paired_windows, paper_values, rules, selection
from experiments.base import SweepArtifact, register_artifact
from experiments.output import Section, fmt, md_table

NAME = "table4"
TITLE = "Table 4 - WikiText-2 perplexity, Llama3-8B"
MODEL = "llama3-8b"
EXPERIMENTS = ("perplexity",)
QUANTIZERS = ("smoothquant", "shadow_outlier", "cmpq", "edgeflow")
# Not in the paper: measured at the budgets it takes, drawn and tabulated beside the paper's methods, in no verdict.
EXTRA = ("aimet",)
SERIES = QUANTIZERS + EXTRA
BITS = (4, 5, 6, 7)
# Windows (2048 tokens) per point: FP16 scores PPL_MAX_WINDOWS; a method stops once the 95% interval of its mean NLL
# difference from FP16 is within ±PPL_HALFWIDTH nats (0.2% in perplexity) or 10% of the difference.
PPL_HALFWIDTH, PPL_MAX_WINDOWS = 0.002, 32
DISPLAY = {"smoothquant": "SmoothQuant", "shadow_outlier": "SO", "cmpq": "CMPQ", "edgeflow": "EdgeFlow",
           "aimet": "AIMET"}
COLORS = dict(zip(SERIES, ("#ff7f0e", "#2ca02c", "#9467bd", "#1f77b4", "#8c564b")))
_ALIASES = {"so": "shadow_outlier", "shadowoutlier": "shadow_outlier", "shadow outlier": "shadow_outlier",
            "smoothquant": "smoothquant", "cmpq": "cmpq", "edgeflow": "edgeflow", "ef": "edgeflow",
            "fp16": "fp16", "none": "fp16", "fp": "fp16"}
FP16_NAMES = ("fp", "fp16", "none")  # quantizer names under which the unquantized model is stored


def sweep(models=("smollm2-135m",), quantizers=SERIES, bits=BITS, ppl_halfwidth: float | None = PPL_HALFWIDTH,
          ppl_max_windows: int | None = PPL_MAX_WINDOWS) -> list[list[str]]:
    """FP16 first (it scores every window up to ppl_max_windows; the quantized points pair their windows with its
    cached ones), then each method at each budget, sized by the interval of its difference from FP16."""
    size = [f"experiment.ppl_max_windows={ppl_max_windows if ppl_max_windows is not None else 'null'}",
            f"experiment.ppl_halfwidth={ppl_halfwidth if ppl_halfwidth is not None else 'null'}"]
    return ([["experiment=perplexity", f"model={m}", *size] for m in models]
            + [["experiment=perplexity", f"model={m}", f"quantizer={q}", f"quantizer.budget_bits={float(b)}", *size]
               for m in models for q in quantizers for b in bits if selection.quantizer_accepts(q, b)])


def paper_table(paper: pd.DataFrame, model: str) -> pd.DataFrame:
    """The paper's perplexities as (quantizer, bits, value, lower_bound) rows, from either CSV shape."""
    if {"metric", "value"} <= set(paper.columns):
        p = paper[paper["metric"].str.contains("perplexity|ppl", na=False)]
        if "model" in p.columns and (p["model"] == model).any():
            p = p[p["model"] == model]
        long = p[["quantizer", "bits", "value"]]
    else:
        method_cols = [c for c in paper.columns if c.strip().lower() in _ALIASES]
        long = paper.melt(id_vars=["bits"], value_vars=method_cols, var_name="quantizer", value_name="value")
    out = []
    for r in long.itertuples():
        value, lower = paper_values.parse_paper_value(r.value)
        q = _ALIASES.get(str(r.quantizer).strip().lower(), str(r.quantizer).strip().lower())
        out.append({"quantizer": q, "bits": None if pd.isna(r.bits) else float(r.bits), "value": value,
                    "lower_bound": lower})
    return pd.DataFrame(out)


def _fp16_named(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows with the unquantized model's quantizer called fp16 (bits None) and a dataset always named."""
    fp = rows["quantizer"].isin(FP16_NAMES)
    return rows.assign(quantizer=rows["quantizer"].where(~fp, "fp16"), bits=rows["bits"].where(~fp, None),
                       dataset=rows["dataset"].fillna("?"))


def _unresolved(ours: dict[str, float], paper: dict, windows: dict[str, pd.Series]) -> list[str]:
    """The adjacent pairs of our order (of the methods the paper has too) whose paired difference on their common
    windows is within its 95% interval of zero, as "A ~ B (+0.0012 ± 0.0030 nats)"."""
    ranked = sorted((q for q in ours if q in paper), key=lambda q: ours[q])
    out = []
    for a, b in zip(ranked, ranked[1:]):
        if a not in windows or b not in windows:
            continue
        resolved, mean, half = paired_windows.order_resolved(windows[a], windows[b])
        if not resolved:
            out.append(f"{DISPLAY.get(a, a)} ~ {DISPLAY.get(b, b)} ({mean:+.4f} ± {half:.4f} nats)")
    return out


def ordering_verdict(ours: dict[str, float], paper: dict[str, tuple[float, bool]]) -> str:
    """Same rank order of the methods both have -> reproduced; same best method -> same direction."""
    common_q = [q for q in ours if q in paper]
    if len(common_q) < 2:
        return rules.NOT_RUN
    rank_ours = sorted(common_q, key=lambda q: ours[q])
    rank_paper = sorted(common_q, key=lambda q: paper[q][0])
    if rank_ours == rank_paper:
        return rules.REPRODUCED
    return rules.SAME_DIRECTION if rank_ours[0] == rank_paper[0] else rules.DIFFERS


def _draw(ours: pd.DataFrame, ref: pd.DataFrame, model_title: str, name: str, figures_dir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for q in SERIES:
        o = ours[ours["quantizer"] == q].sort_values("bits")
        if len(o):
            extra = ", not in the paper" if q in EXTRA else ""
            ax.errorbar(o["bits"], o["median"], yerr=[o["median"] - o["min"], o["max"] - o["median"]], marker="o",
                        color=COLORS[q], label=f"{DISPLAY[q]} (ours{extra})", capsize=2)
        p = ref[ref["quantizer"] == q].sort_values("bits")
        if len(p):
            ax.plot(p["bits"], p["value"], "--", marker="s", mfc="white", color=COLORS[q], alpha=0.8,
                    label=f"{DISPLAY[q]} (paper)")
            for b, v in zip(p["bits"], p["value"]):
                if p.loc[(p["bits"] == b), "lower_bound"].any():
                    ax.annotate(f">{v:g}", (b, v), fontsize=7, xytext=(3, 3), textcoords="offset points")
    for source, frame, style in (("ours", ours[ours["quantizer"] == "fp16"], "-"), ("paper", ref[ref["quantizer"] == "fp16"], "--")):
        if len(frame):
            v = frame["median" if source == "ours" else "value"].iloc[0]
            ax.axhline(v, color="black", linestyle=style, linewidth=0.8, label=f"FP16 ({source})")
    ax.set_yscale("log")
    ax.set_xticks(list(BITS))
    ax.set_xlabel("average bits")
    ax.set_ylabel("WikiText-2 perplexity (log)")
    ax.set_title(model_title, fontsize=9)
    ax.legend(fontsize=6.5, ncol=2)
    fig.tight_layout()
    return output.save_figure(fig, name, figures_dir)


def _ordering_line(name: str, m: str, dataset: str, b: float, per_model: pd.DataFrame, ref: pd.DataFrame,
                   nlls: dict, refs: dict, caps: list[str], scorer_note: str) -> tuple[dict, rules.Claim]:
    """The table line of one bit width (ours / paper per method, the ordering verdict) and its scoreboard claim.
    With per-window NLLs for every method, the ranking is by the paired estimates (paired_windows) and an adjacent
    pair within noise makes the ordering inconclusive."""
    mine = {r.quantizer: r.median for r in per_model[per_model["bits"] == b].itertuples()}
    theirs = {r.quantizer: (r.value, r.lower_bound) for r in ref[ref["bits"] == b].itertuples()}
    windows = {q: nlls[(m, dataset, q, b)] for q in mine if (m, dataset, q, b) in nlls}
    fp_windows, est = nlls.get((m, dataset, "fp16", None)), {}
    if fp_windows is not None:
        for q, w in windows.items():
            e = paired_windows.estimate(w, refs.get((m, dataset, q, b), fp_windows), fp_windows.mean())
            if e is not None:
                est[q] = e
    paired = bool(est) and set(est) == set(mine)
    ranking = {q: e.ppl for q, e in est.items()} if paired else mine
    raw = ordering_verdict(ranking, theirs)
    unresolved = _unresolved(ranking, theirs, windows) if paired else []
    if unresolved and raw in (rules.REPRODUCED, rules.SAME_DIRECTION, rules.DIFFERS):
        raw = rules.INCONCLUSIVE
    v = rules.cap(raw, caps)
    line = {"bits": f"{b:g}"}
    for q in QUANTIZERS:
        p = theirs.get(q)
        cell = est[q].text() if q in est else fmt(mine.get(q))
        line[DISPLAY[q]] = f"{cell} / {(('>' if p[1] else '') + f'{p[0]:g}') if p else '–'}"
    for q in EXTRA:
        line[f"{DISPLAY[q]} (ours only)"] = est[q].text() if q in est else fmt(mine.get(q))
    line["windows"] = (", ".join(f"{DISPLAY.get(q, q)} {est[q].windows}" for q in SERIES if q in est)
                       if est else "no per-window rows: no intervals")
    line["order within noise"] = ("; ".join(unresolved) or "none") if paired else "–"
    line["ordering"], line["before the cap"] = v, raw

    def order(values: dict) -> str:
        return " < ".join(DISPLAY.get(q, q) for q in sorted(values, key=values.get))

    claim = rules.Claim(name, f"perplexity ordering of the methods at {b:g} bits ({m}, {dataset}{scorer_note})",
                        order({q: said[0] for q, said in theirs.items() if q in QUANTIZERS}),
                        order({q: ppl for q, ppl in ranking.items() if q in QUANTIZERS}), v, list(caps))
    return line, claim


def _scored(rows: pd.DataFrame) -> pd.DataFrame:
    """Our current rows with the FP16 reference named and a `scorer`: what computed each perplexity (the fake-quant
    model, HTP's simulator, an engine), never pooled; FP16's torch model ('') is every scorer's reference."""
    cur = _fp16_named(selection.with_conditions(selection.current(rows)))
    return cur.assign(scorer=np.where(cur["quantizer"] == "fp16", "", selection.scoring_path(cur)))


def render_for(name: str, title: str, model: str, rows: pd.DataFrame, paper: pd.DataFrame | None,
               figures_dir: Path) -> Section:
    """Table 4 or 5: our perplexities beside the paper's `model` table, one table per model, evaluation set (a
    local proxy's perplexities and WikiText-2's are never pooled) and scorer."""
    cur = _scored(rows)
    all_ok = selection.ok_rows(cur, "perplexity")
    if model in set(all_ok["model"]):
        all_ok = all_ok[all_ok["model"] == model]
    if all_ok.empty:
        return output.not_run_section(name, title, "no perplexity rows in the store")
    ref = pd.DataFrame(columns=["quantizer", "bits", "value", "lower_bound"]) if paper is None \
        else paper_table(paper, model)
    scorers = sorted(set(all_ok["scorer"]) - {""}) or [""]
    groups = [(scorer, key, per_model) for scorer in scorers
              for key, per_model in selection.summarize(all_ok[all_ok["scorer"].isin([scorer, ""])],
                                                        ["model", "dataset", "source", "quantizer", "bits"]
                                                        ).groupby(["model", "dataset", "source"])]
    sections, figures, scoreboard = [], [], []
    for scorer, (m, dataset, source), per_model in groups:
        mine_rows = cur[cur["scorer"].isin([scorer, ""])]
        ok = all_ok[all_ok["scorer"].isin([scorer, ""])]
        nlls, refs = paired_windows.windows(mine_rows), paired_windows.windows(mine_rows, "window_nll_ref")
        caps = rules.cap_reasons(ok[(ok["model"] == m) & (ok["dataset"] == dataset)], {model}, device_matters=False)
        scorer_note = f", {scorer}" if len(scorers) > 1 else ""
        made = [_ordering_line(name, m, dataset, b, per_model, ref, nlls, refs, caps, scorer_note)
                for b in sorted(per_model["bits"].dropna().unique())]
        scoreboard += [claim for _, claim in made]
        fp, fp_ref = per_model[per_model["quantizer"] == "fp16"], ref[ref["quantizer"] == "fp16"]
        fp_text = (f"FP16: ours {fmt(fp['median'].iloc[0]) if len(fp) else '–'}, paper "
                   f"{fmt(fp_ref['value'].iloc[0]) if len(fp_ref) else '–'}.")
        where = (f"{m}, {dataset}" + (" (local proxy text)" if source == "proxy" else "")
                 + (f", scored by the {scorer}" if len(scorers) > 1 else ""))
        suffix = f"-{scorer.replace(' ', '-')}" if len(scorers) > 1 else ""
        figures += _draw(per_model, ref, f"{title}: ours ({where}) beside the paper's ({model}, WikiText-2)",
                         name if len(groups) == 1 else f"{name}-{m}-{dataset}{suffix}", figures_dir)
        cap_text = f" Capped at *qualitative*: {'; '.join(caps)}." if caps else ""
        sections.append(f"**{where}** (cells: ours / paper; protocol and context length in the rows' notes). "
                        f"{fp_text}{cap_text}\n\n" + md_table(pd.DataFrame([line for line, _ in made])))
    verdict, count = rules.overall([claim.verdict for claim in scoreboard])
    if paper is None:
        count += f"; results/paper/{name}.csv is missing"
    pngs = [f for f in figures if f.suffix == ".png"]
    spans = selection.spans_note(all_ok, ("model", "source"))
    tags = selection.labels(all_ok)
    body = ("".join(f"![{title}](figures/{p.name})\n\n" for p in pngs)
            + ("Labels: " + "; ".join(tags) + ".\n\n" if tags else "") + (f"{spans}\n\n" if spans else "")
            + "\n".join(sections))
    return Section(name, title, verdict, count, body, figures, claims=scoreboard)


def render(rows: pd.DataFrame, paper: pd.DataFrame | None, figures_dir: Path) -> Section:
    return render_for(NAME, TITLE, MODEL, rows, paper, figures_dir)


@register_artifact
class Table4(SweepArtifact):
    NAME, TITLE, EXPERIMENTS = NAME, TITLE, EXPERIMENTS
    sweep, render = staticmethod(sweep), staticmethod(render)
