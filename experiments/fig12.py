"""Figure 12 (and Appendix C's Figure 18): accuracy of SmoothQuant, shadow outliers, CMPQ and EdgeFlow at 4-7 average
bits on each dataset, and EdgeFlow's average gain over each.

Ours: `accuracy` rows (a fraction) per model, quantizer, bits and dataset; a gain is EdgeFlow's accuracy minus the
baseline's in percentage points, averaged over the datasets both ran. The paper gives per-bit gains vs CMPQ and a
4..7-bit range vs SmoothQuant and SO (results/paper/fig12.csv); both are compared under the accuracy rule.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from experiments import common, fig10, table4
from experiments.common import Section, md_table

NAME = "fig12"
TITLE = "Figure 12 - accuracy of quantization schemes across bit-widths"
EXPERIMENTS = ("accuracy",)
QUANTIZERS = table4.QUANTIZERS
BASELINES = ("smoothquant", "shadow_outlier", "cmpq")
PAPER_MODELS = ("llama3-8b", "phi3-3.8b")


def sweep(models=("smollm2-135m",), datasets=fig10.DATASETS, quantizers=QUANTIZERS, bits=table4.BITS):
    return [["experiment=accuracy", f"model={m}", f"dataset={d}", f"quantizer={q}", f"quantizer.budget_bits={float(b)}"]
            for m in models for d in datasets for q in quantizers for b in bits]


def gains(acc: pd.DataFrame) -> pd.DataFrame:
    """EdgeFlow minus each baseline, in percentage points, averaged over datasets: (model, quantizer, bits, gain_pp)."""
    out = []
    for (model, bits), g in acc.groupby(["model", "bits"]):
        wide = g.pivot_table(index="dataset", columns="quantizer", values="median")
        if "edgeflow" not in wide.columns:
            continue
        for q in BASELINES:
            if q in wide.columns:
                d = (wide["edgeflow"] - wide[q]).dropna() * 100
                if len(d):
                    out.append({"model": model, "quantizer": q, "bits": bits, "gain_pp": float(d.mean()),
                                "datasets": len(d)})
    return pd.DataFrame(out, columns=["model", "quantizer", "bits", "gain_pp", "datasets"])


def compare(ours: pd.DataFrame, paper: pd.DataFrame, model: str) -> list[dict]:
    """Our gains beside the paper's for `model`'s paper values: per bit where the paper has them, else min/max."""
    ref_model = model if model in PAPER_MODELS else PAPER_MODELS[0]
    ref = paper[paper["model"] == ref_model]
    mine = ours[ours["model"] == model]
    lines = []
    for q in BASELINES:
        m = mine[mine["quantizer"] == q]
        per_bit = ref[(ref["quantizer"] == q) & (ref["metric"] == "accuracy_gain_pct")]
        for p in per_bit.itertuples():
            hit = m[m["bits"] == p.bits]
            ours_pp = float(hit["gain_pp"].iloc[0]) if len(hit) else None
            lines.append({"model": model, "paper model": ref_model, "vs": table4.DISPLAY[q], "bits": f"{p.bits:g}",
                          "ours (pp)": common.fmt(ours_pp, 4), "paper (%)": f"{p.value:.2f}",
                          "verdict": common.points_verdict(ours_pp, p.value)})
        for stat, fn in (("min", min), ("max", max)):
            p = ref[(ref["quantizer"] == q) & (ref["metric"] == f"accuracy_gain_pct_{stat}")]
            if p.empty:
                continue
            ours_pp = fn(m["gain_pp"]) if len(m) else None
            lines.append({"model": model, "paper model": ref_model, "vs": table4.DISPLAY[q], "bits": f"{stat} over 4–7",
                          "ours (pp)": common.fmt(ours_pp, 4), "paper (%)": f"{p['value'].iloc[0]:.2f}",
                          "verdict": common.points_verdict(ours_pp, float(p["value"].iloc[0]))})
    return lines


def _draw(acc: pd.DataFrame, fp16: pd.DataFrame, model: str, name: str, figures_dir: Path, tags: str) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    datasets = [d for d in fig10.DATASETS if d in set(acc["dataset"])] + sorted(set(acc["dataset"]) - set(fig10.DATASETS))
    fig, axes = plt.subplots(1, len(datasets), figsize=(3.2 * len(datasets), 3.4), squeeze=False, sharey=True)
    colors = dict(zip(QUANTIZERS, ("#ff7f0e", "#2ca02c", "#9467bd", "#1f77b4")))
    for ax, dataset in zip(axes[0], datasets):
        for q in QUANTIZERS:
            s = acc[(acc["dataset"] == dataset) & (acc["quantizer"] == q)].sort_values("bits")
            if len(s):
                ax.errorbar(s["bits"], 100 * s["median"], yerr=[100 * (s["median"] - s["min"]),
                            100 * (s["max"] - s["median"])], marker="o", capsize=2, color=colors[q],
                            label=table4.DISPLAY[q])
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
    return common.save_figure(fig, name, figures_dir)


def render(rows: pd.DataFrame, paper: pd.DataFrame | None, figures_dir: Path) -> Section:
    ok = common.ok_rows(rows, "accuracy")
    # Figure 10's baseline accuracy points share the folder (e.g. shadow outliers at INT8 for llm.npu+): keep the
    # quantizer sweep's rows only.
    ok = ok[ok["quantizer"].isin([*QUANTIZERS, *table4.FP16_NAMES]) & ~ok["system"].isin(fig10.BASELINES)
            & (ok["bits"].isin(table4.BITS) | ok["quantizer"].isin(table4.FP16_NAMES))]
    if ok.empty:
        return common.not_run_section(NAME, TITLE, "no accuracy rows of these quantizers in the store")
    acc = common.summarize(ok, ["model", "quantizer", "bits", "dataset"])
    fp16 = acc[acc["quantizer"].isin(table4.FP16_NAMES)]
    acc = acc[acc["quantizer"].isin(QUANTIZERS)]
    ours = gains(acc)
    figures, lines, tables = [], [], []
    models = sorted(acc["model"].unique())
    for model in models:
        per_model = ok[ok["model"] == model]
        tags = "; ".join(common.labels(per_model))
        figures += _draw(acc[acc["model"] == model], fp16[fp16["model"] == model], model,
                         NAME if len(models) == 1 else f"{NAME}-{model}", figures_dir, tags)
        if paper is not None:
            lines += compare(ours, paper, model)
        a = acc[acc["model"] == model].assign(cell=lambda d: [f"{100 * v:.1f}" for v in d["median"]])
        wide = a.pivot_table(index=["dataset", "bits"], columns="quantizer", values="cell", aggfunc="first")
        tables.append(f"**{model}: our accuracy (%)**, median over repetitions ({tags}):\n\n"
                      + md_table(wide.reset_index()))
    verdict, count = common.overall([line["verdict"] for line in lines])
    note = common.models_differ_note(set(models), set(PAPER_MODELS))
    body = "".join(f"![{TITLE}](figures/{p.name})\n\n" for p in figures if p.suffix == ".png")
    body += (f"{note}\n\n" if note else "") + ("**EdgeFlow's accuracy gain** over each baseline (ours: percentage "
                                                "points, mean over datasets; the paper's: percent as it states them)."
                                                "\n\n")
    body += md_table(pd.DataFrame(lines)) + "\n" + "\n".join(tables)
    return Section(NAME, TITLE, verdict, count, body, figures)
