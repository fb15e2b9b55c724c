"""Figure 12 (and Appendix C's Figure 18): accuracy of SmoothQuant, shadow outliers, CMPQ and EdgeFlow at 4-7 average
bits on each dataset, and EdgeFlow's average gain over each; AIMET (not in the paper, 4 bits) as an extra series
with its gain in a table of its own, outside every verdict.

Ours: `accuracy` rows (a fraction over their `items`) per model, dataset source (builtin or local
proxy: never pooled), quantizer, bits and dataset; a gain is EdgeFlow's accuracy minus the baseline's in percentage
points, averaged over the datasets both ran, with a 95% interval from the accuracies' Wilson intervals (MOVER), paired
by document where both runs kept their per-document results (`item_accuracy` rows): two quantizers of one model that
get mostly the same documents right differ by less than two independent accuracies would (docs/experiments.md has
the numbers). The paper gives per-bit gains vs CMPQ and a 4..7-bit range vs SmoothQuant and SO
(results/paper/fig12.csv); both are compared under the accuracy rule.
"""
from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from experiments import fig10, lineup, output, rules, selection, stats, table4
from experiments.base import SweepArtifact, register_artifact
from experiments.output import Section, md_table
from harness.runner.kinds import ITEM_ACCURACY

NAME = "fig12"
TITLE = "Figure 12 - accuracy of quantization schemes across bit-widths"
EXPERIMENTS = ("accuracy",)
QUANTIZERS = table4.QUANTIZERS
BASELINES = ("smoothquant", "shadow_outlier", "cmpq")
PAPER_MODELS = ("llama3-8b", "phi3-3.8b")
POINT = ["model", "source", "quantizer", "bits", "dataset"]  # what one accuracy point of the figure is
# Each method's accuracy through our runtime's INT8 forward pass where it can run the method (3.4x faster per
# lambada-local document than the fake-quant model, 1.9x per hellaswag-local one on the AVX-512 EPYC), the
# fake-quant model elsewhere (shadow outliers need a float path beside the INT8 matmul); "fake-quant" for every method
EVALUATOR = "runtime"


def sweep(models=("smollm2-135m",), datasets=fig10.DATASETS, quantizers=table4.SERIES, bits=table4.BITS,
          evaluator: str = EVALUATOR):
    return [["experiment=accuracy", f"model={m}", f"dataset={d}", f"quantizer={q}", f"quantizer.budget_bits={float(b)}",
             f"experiment.extra.evaluator={evaluator}"]
            for m in models for d in datasets for q in quantizers for b in bits if selection.quantizer_accepts(q, b)]


def gains(acc: pd.DataFrame, per_item: dict | None = None) -> pd.DataFrame:
    """EdgeFlow minus each baseline, in percentage points, averaged over datasets, per model and dataset source (when
    `acc` has a source column): (model, source, quantizer, bits, gain_pp, lo, hi, datasets, paired_items). The 95%
    interval combines the accuracies' Wilson intervals by MOVER. Where `per_item` ({(model, source, quantizer, bits,
    dataset): {doc_id: 0 or 1}}) has both methods' documents, the two are compared on the documents both scored,
    with their correlation (Newcombe's paired method 10): methods that get mostly the same items right are known to
    differ by less than two independent samples would say. paired_items: the fewest documents a paired dataset had
    (NaN when none was paired)."""
    keys = ["model", "source", "bits"] if "source" in acc.columns else ["model", "bits"]
    out = []
    for values, g in acc.groupby(keys):
        cond = dict(zip(keys, values))
        wide = g.pivot_table(index="dataset", columns="quantizer", values="median")
        items = (g.pivot_table(index="dataset", columns="quantizer", values="items")
                 if "items" in g.columns and g["items"].notna().any() else pd.DataFrame())
        if "edgeflow" not in wide.columns:
            continue
        for q in (*BASELINES, *table4.EXTRA):
            if q not in wide.columns:
                continue
            both = [d for d in wide.index if pd.notna(wide.loc[d, "edgeflow"]) and pd.notna(wide.loc[d, q])]
            if not both:
                continue
            terms, correlations, paired = [], {}, []
            for d in both:
                ours, theirs = (_documents(per_item, cond, col, d) for col in ("edgeflow", q))
                common_ids = sorted(set(ours) & set(theirs))
                if common_ids:
                    x, y = [ours[i] for i in common_ids], [theirs[i] for i in common_ids]
                    n = len(common_ids)
                    correlations[(len(terms), len(terms) + 1)] = stats.paired_phi(x, y)
                    terms += [(1 / len(both), sum(x) / n, n), (-1 / len(both), sum(y) / n, n)]
                    paired.append(n)
                else:
                    terms += [(c / len(both), float(wide.loc[d, col]), _items(items, d, col))
                              for c, col in ((1, "edgeflow"), (-1, q))]
            v, lo, hi = stats.combination_interval(terms, correlations)
            v = round(v, 12) + 0.0  # equal accuracies give 0, not the residue of their weighted sum (-2.8e-17) or -0
            out.append({**cond, "quantizer": q, "gain_pp": 100 * v, "lo": 100 * lo, "hi": 100 * hi,
                        "datasets": len(both), "paired_items": min(paired) if paired else math.nan,
                        "reference": float(wide.loc[both, q].mean())})  # the baseline's accuracy: a relative %'s base
    return pd.DataFrame(out, columns=["model", "source", "quantizer", "bits", "gain_pp", "lo", "hi", "datasets",
                                      "paired_items", "reference"])


def _documents(per_item: dict | None, cond: dict, quantizer: str, dataset: str) -> dict:
    key = (cond["model"], cond.get("source"), quantizer, float(cond["bits"]), dataset)
    return (per_item or {}).get(key, {})


def one_scorer_per_method(ok: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """(rows, note): per method, the rows of one scorer (selection.scoring_path: our runtime, or the fake-quant model
    where the runtime cannot run the method): one method's accuracy from two scorers is two measurements, never
    pooled. This figure's own points (no system) come first, Figure 10's EdgeFlow points (our runtime over the packed
    file, system edgeflow) only for a method that has none. The note names what was left out."""
    ok = ok.assign(scorer=selection.scoring_path(ok))
    parts = [selection.one_condition(g, ("scorer",), preferred=g["system"].isna())
             for _, g in ok.groupby("quantizer", dropna=False)]
    if not parts:
        return ok, ""
    return pd.concat([rows for rows, _ in parts]), " ".join(note for _, note in parts if note)


def scorers_note(ok: pd.DataFrame) -> str:
    """Which scorer computed each method's points (a sentence; '' when no row says)."""
    if "scorer" not in ok.columns or ok.empty:
        return ""
    by = ok.groupby("scorer")["quantizer"].agg(lambda q: sorted(set(q)))
    names = {"edgeflow": "our runtime's INT8 forward pass", "fake-quant model": "the fake-quant torch model"}
    parts = [f"{', '.join(table4.DISPLAY.get(q, q) for q in qs)} by {names.get(scorer, scorer)}"
             for scorer, qs in by.items()]
    return ("Scored by: " + "; ".join(parts) + ". Where a gain's two methods had different scorers, the runtime's "
            "agreement rows (runtime vs fake-quant model on the same requests) bound what the scorers add.")


def item_rows(current: pd.DataFrame) -> pd.DataFrame:
    """The item_accuracy rows (one per document an accuracy job scored) of `current` rows (selection.current, with
    their conditions)."""
    items = selection.ok_rows(current, ITEM_ACCURACY)
    return items[items["prompt_index"].notna()]


def per_item_results(items: pd.DataFrame, kept: pd.DataFrame) -> dict:
    """{(model, source, quantizer, bits, dataset): {doc_id: value}} from the item rows of the jobs whose accuracy rows
    were `kept` (the same configuration hashes)."""
    items = items[items["config_hash"].isin(set(kept["config_hash"]))]
    out: dict = {}
    for key, g in items.groupby(POINT):
        out[(key[0], key[1], key[2], float(key[3]), key[4])] = dict(zip(g["prompt_index"].astype(int), g["value"]))
    return out


def one_run_per_point(ok: pd.DataFrame, itemized: set) -> pd.DataFrame:
    """Runs over different item counts are different measurements, never pooled: per model, source, quantizer, bits
    and dataset, the runs with per-document results (`itemized` config hashes: they pair), over the most items."""
    rank = ok["config_hash"].isin(itemized).astype(float) * 1e9 + ok["items"].fillna(0)
    return ok[rank == rank.groupby([ok[k] for k in POINT], dropna=False).transform("max")]


def _items(items: pd.DataFrame, dataset: str, column: str):
    v = items.loc[dataset, column] if dataset in items.index and column in items.columns else None
    return None if v is None or pd.isna(v) else int(v)


def compare(ours: pd.DataFrame, paper: pd.DataFrame, model: str, source: str | None = None, caps=()) -> list[dict]:
    """Our gains beside the paper's for `model`'s paper values (of one dataset source): per bit where the paper has
    them, else its min/max over 4..7 bits against ours at the bit-width that attains our min/max."""
    ref_model = model if model in PAPER_MODELS else PAPER_MODELS[0]
    ref = paper[paper["model"] == ref_model]
    mine = ours[ours["model"] == model]
    if source is not None and "source" in mine.columns:
        mine = mine[mine["source"] == source]
    where = model + (" · proxy data" if source == "proxy" else " · builtin data" if source else "")

    def line(vs, bits, hit, paper_value):
        ours_pp, lo, hi = ((float(hit["gain_pp"]), float(hit["lo"]), float(hit["hi"])) if hit is not None
                           else (None, None, None))
        args = dict(interval=(lo, hi) if hit is not None else None)
        reference = float(hit["reference"]) if hit is not None else None
        return {"condition": where, "paper model": ref_model, "vs": table4.DISPLAY[vs], "bits": bits,
                "ours (pp) [95%]": output.interval_text(ours_pp, lo, hi, 4) if hit is not None else "–",
                "interval": _pairing(hit), "paper": rules.percent_text(paper_value, reference),
                "verdict": rules.percent_verdict(ours_pp, paper_value, reference, caps=caps, **args),
                "before the cap": rules.percent_verdict(ours_pp, paper_value, reference, **args),
                "_caps": list(caps) if hit is not None else [f"not run: no {table4.DISPLAY[vs]} accuracy at {bits}"]}

    lines = []
    for q in BASELINES:
        m = mine[mine["quantizer"] == q]
        per_bit = ref[(ref["quantizer"] == q) & (ref["metric"] == "accuracy_gain_pct")]
        for p in per_bit.itertuples():
            hit = m[m["bits"] == p.bits]
            lines.append(line(q, f"{p.bits:g}", hit.iloc[0] if len(hit) else None, p.value))
        for stat in ("min", "max"):
            p = ref[(ref["quantizer"] == q) & (ref["metric"] == f"accuracy_gain_pct_{stat}")]
            if p.empty:
                continue
            hit = m.loc[m["gain_pp"].idxmin() if stat == "min" else m["gain_pp"].idxmax()] if len(m) else None
            label = f"{stat} over 4–7" + (f" (ours at {hit['bits']:g})" if hit is not None else "")
            lines.append(line(q, label, hit, float(p["value"].iloc[0])))
    return lines


def _draw(acc: pd.DataFrame, fp16: pd.DataFrame, model: str, name: str, figures_dir: Path, tags: str) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    datasets = [d for d in fig10.DATASETS if d in set(acc["dataset"])] + sorted(set(acc["dataset"]) - set(fig10.DATASETS))
    fig, axes = plt.subplots(1, len(datasets), figsize=(3.2 * len(datasets), 3.4), squeeze=False, sharey=True)
    for ax, dataset in zip(axes[0], datasets):
        for q in table4.SERIES:
            s = acc[(acc["dataset"] == dataset) & (acc["quantizer"] == q)].sort_values("bits")
            if len(s):
                ax.errorbar(s["bits"], 100 * s["median"], yerr=[100 * (s["median"] - s["min"]),
                            100 * (s["max"] - s["median"])], marker="o", capsize=2, color=table4.COLORS[q],
                            label=table4.DISPLAY[q] + (" (not in the paper)" if q in table4.EXTRA else ""))
        f = fp16[fp16["dataset"] == dataset]
        if len(f):
            ax.axhline(100 * f["median"].iloc[0], color="black", linestyle=":", label="FP16")
        ax.set_title(dataset, fontsize=9)
        ax.set_xticks(list(table4.BITS))
        ax.set_xlabel("average bits")
    axes[0][0].set_ylabel("accuracy (%)")
    axes[0][0].legend(fontsize=7)
    fig.suptitle(f"Figure 12 (ours): {model}; {tags}", fontsize=9)
    fig.tight_layout()
    return output.save_figure(fig, name, figures_dir)


def render(rows: pd.DataFrame, paper: pd.DataFrame | None, figures_dir: Path) -> Section:
    current = selection.with_conditions(selection.current(rows))
    ok = selection.ok_rows(current, "accuracy")
    # Figure 10's baseline accuracy points share the folder (e.g. shadow outliers at INT8 for llm.npu+): keep the
    # quantizer sweep's rows only.
    ok = ok[ok["quantizer"].isin([*table4.SERIES, *table4.FP16_NAMES]) & ~ok["system"].isin(lineup.peers())
            & (ok["bits"].isin(table4.BITS) | ok["quantizer"].isin(table4.FP16_NAMES))]
    if ok.empty:
        return output.not_run_section(NAME, TITLE, "no accuracy rows of these quantizers in the store")
    ok, left_out = one_scorer_per_method(ok)
    items_rows = item_rows(current)
    ok = one_run_per_point(ok, set(items_rows["config_hash"]))
    acc = selection.summarize(ok, POINT)
    items = ok.groupby(POINT, dropna=False)["items"].min()
    acc["items"] = [items.get(tuple(k)) for k in acc[POINT].itertuples(index=False)]
    fp16 = acc[acc["quantizer"].isin(table4.FP16_NAMES)]
    acc = acc[acc["quantizer"].isin(table4.SERIES)]
    ours = gains(acc, per_item_results(items_rows, ok))
    figures, lines, tables, capped = [], [], [], []
    groups = sorted({(m, s) for m, s in zip(acc["model"], acc["source"])})
    for model, source in groups:
        per = ok[(ok["model"] == model) & (ok["source"] == source)]
        sel = (acc["model"] == model) & (acc["source"] == source)
        tags = "; ".join(selection.labels(per))
        where = f"{model}, {'local proxy tasks' if source == 'proxy' else 'lm-eval builtin tasks'}"
        figures += _draw(acc[sel], fp16[(fp16["model"] == model) & (fp16["source"] == source)], where,
                         NAME if len(groups) == 1 else f"{NAME}-{model}-{source}", figures_dir, tags)
        caps = rules.cap_reasons(per, PAPER_MODELS, device_matters=False)
        if caps:
            capped.append(f"- {where}: {'; '.join(caps)}")
        if paper is not None:
            lines += compare(ours, paper, model, source, caps)
        a = acc[sel].assign(cell=lambda d: [_acc_cell(v, n) for v, n in zip(d["median"], d["items"])])
        wide = a.pivot_table(index=["dataset", "bits"], columns="quantizer", values="cell", aggfunc="first")
        tables.append(f"**{where}: our accuracy (%)** [Wilson 95% interval], median over repetitions ({tags}):\n\n"
                      + md_table(wide.reset_index()))
    verdict, count = rules.overall([line["verdict"] for line in lines])
    note = selection.models_differ_note(set(acc["model"]), set(PAPER_MODELS))
    spans = selection.spans_note(ok, ("model", "source"))
    body = "".join(f"![{TITLE}](figures/{p.name})\n\n" for p in figures if p.suffix == ".png")
    body += "".join(f"{text}\n\n" for text in (note, spans, scorers_note(ok), left_out) if text)
    if capped:
        body += "Agreement can only be *qualitative* (the cap) here because:\n\n" + "\n".join(capped) + "\n\n"
    body += ("**EdgeFlow's accuracy gain** over each baseline (ours: percentage points, mean over datasets, with the "
             "95% interval combining the accuracies' Wilson intervals, paired by document where both runs kept their "
             "documents' results (Newcombe's method 10); the paper's: percent as it states them).\n\n")
    body += md_table(pd.DataFrame(lines)) + "\n" + _extra_gains(ours) + "\n".join(tables)
    claims = rules.claims(NAME, lines, lambda line: f"accuracy gain of EdgeFlow over {line['vs']}, {line['bits']} "
                           f"bits ({line['condition']})", ours="ours (pp) [95%]")
    return Section(NAME, TITLE, verdict, count, body, figures, claims=claims)


def _extra_gains(ours: pd.DataFrame) -> str:
    """EdgeFlow's gain over the methods the paper did not compare (AIMET): ours only, no verdict."""
    extra = ours[ours["quantizer"].isin(table4.EXTRA)]
    if extra.empty:
        return ""
    lines = [{"condition": f"{r.model} · {r.source}", "vs": table4.DISPLAY[r.quantizer], "bits": f"{r.bits:g}",
              "ours (pp) [95%]": output.interval_text(r.gain_pp, r.lo, r.hi, 4), "datasets": r.datasets}
             for r in extra.itertuples()]
    return ("\n**EdgeFlow's gain over methods the paper does not compare** (measured here only; no verdict):\n\n"
            + md_table(pd.DataFrame(lines)) + "\n")


def _pairing(hit) -> str:
    if hit is None:
        return "–"
    n = hit.get("paired_items")
    return "unpaired (Wilson, MOVER)" if n is None or pd.isna(n) else f"paired over {int(n)} documents"


def _acc_cell(value: float, items) -> str:
    if items is None or pd.isna(items):
        return f"{100 * value:.1f}"
    lo, hi = stats.wilson(value * items, int(items))
    return f"{100 * value:.1f} [{100 * lo:.1f}–{100 * hi:.1f}]"


@register_artifact
class Fig12(SweepArtifact):
    NAME, TITLE, EXPERIMENTS = NAME, TITLE, EXPERIMENTS
    sweep, render = staticmethod(sweep), staticmethod(render)
