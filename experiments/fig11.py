"""Figure 11 (section 5.3): the ablation - per-tensor INT4 and INT8, EdgeFlow's adaptive quantization at 5 bits
stored as INT4/INT8 mixed padding, + the SIMD-friendly (weightlet) packing, + the granular pipeline - as cold TTFT
and accuracy per dataset, normalised to INT8.

All five run in our runtime (system=edgeflow), so only the named technique changes from one to the next:
    INT4        quantizer=int4, packing=mixed48 (4-bit codes, nothing padded), pipeline=llmnpu-static
    INT8        quantizer=int8, packing=int8, pipeline=llmnpu-static
    EF 5b       quantizer=edgeflow 5 bits, packing=mixed48 (channels over 4 bits padded to 8), pipeline=llmnpu-static
    +pack       the same with packing=weightlet
    +pipeline   the same with pipeline=place+priority+steal
TTFT: `ttft` rows at each dataset's prompts; accuracy: `accuracy` rows by the runtime over the packed file. +pack and
+pipeline compute what EF 5b computes (same codes, same numerics), so they share its accuracy.
"""
from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pandas as pd

from experiments import fig10, output, rules, selection
from experiments.base import SweepArtifact, register_artifact
from experiments.output import Section, fmt, md_table
from harness.engine.run import DEFAULT_POLICY

NAME = "fig11"
TITLE = "Figure 11 - ablation: INT4, INT8, EdgeFlow 5 bits, + packing, + pipeline"
EXPERIMENTS = ("ttft", "accuracy")
FILTERS = {"model": "models", "dataset": "datasets"}
PAPER_MODELS = {"llama3-8b", "phi3-3.8b"}
# name -> (quantizer option, its name in rows, bits, packing, pipeline)
CONFIGS = {
    "INT4": ("int4", "uniform", 4.0, "mixed48", "llmnpu-static"),
    "INT8": ("int8", "uniform", 8.0, "int8", "llmnpu-static"),
    "EF 5b": ("edgeflow", "edgeflow", 5.0, "mixed48", "llmnpu-static"),
    "+pack": ("edgeflow", "edgeflow", 5.0, "weightlet", "llmnpu-static"),
    "+pipeline": ("edgeflow", "edgeflow", 5.0, "weightlet", DEFAULT_POLICY),
}
ACCURACY_OF = {"+pack": "EF 5b", "+pipeline": "EF 5b"}  # same numerics
LONG, SHORT = ("mmlu", "hellaswag"), ("lambada", "winogrande", "openbookqa")


def sweep(models=("smollm2-135m",), datasets=fig10.DATASETS, device="local", flash_mbps: float | None = None,
          ttft_prompts: int = 3, eval_limit: int = 100) -> list[list[str]]:
    points = []
    for model, dataset in itertools.product(models, datasets):
        for name, (option, _, bits, packing, pipeline) in CONFIGS.items():
            base = [f"model={model}", "system=edgeflow", f"quantizer={option}", f"quantizer.budget_bits={bits}",
                    f"packing={packing}", f"dataset={dataset}"]
            dev = [f"device={device}"] + ([f"device.flash_read_mbps={float(flash_mbps)}"] if flash_mbps else [])
            points.append(["experiment=ttft", *base, f"pipeline={pipeline}", *dev,
                           f"experiment.extra.n_prompts={ttft_prompts}"])
            if name not in ACCURACY_OF:
                points.append(["experiment=accuracy", *base, f"experiment.eval_limit={eval_limit}"])
    return points


def config_of(row) -> str | None:
    """Which of CONFIGS an EdgeFlow row measures (accuracy: by quantizer and bits; TTFT: also packing and pipeline)."""
    for name, (_, quantizer, bits, packing, pipeline) in CONFIGS.items():
        if (row["quantizer"], row["bits"]) != (quantizer, bits):
            continue
        if row["metric"] == "accuracy":
            if name not in ACCURACY_OF:
                return name
        elif (row["packing"], row["pipeline"]) == (packing, pipeline):
            return name
    return None


def summary(rows: pd.DataFrame) -> pd.DataFrame:
    """Median TTFT and accuracy per model, dataset and configuration (accuracy shared where ACCURACY_OF says)."""
    ok = rows[(rows["status"] == "ok") & (rows["system"] == "edgeflow") & rows["metric"].isin(["ttft_s", "accuracy"])]
    if ok.empty:
        return pd.DataFrame(columns=["model", "dataset", "config", "ttft_s", "accuracy"])
    ok = ok.assign(config=[config_of(r) for r in ok.to_dict("records")]).dropna(subset=["config"])
    med = ok.pivot_table(index=["model", "dataset", "config"], columns="metric", values="value", aggfunc="median")
    med = med.reset_index().reindex(columns=["model", "dataset", "config", "ttft_s", "accuracy"])
    for name, of in ACCURACY_OF.items():
        acc = med[med["config"] == of].set_index(["model", "dataset"])["accuracy"]
        mask = med["config"] == name
        med.loc[mask, "accuracy"] = [acc.get((m, d), math.nan) for m, d in zip(med.loc[mask, "model"],
                                                                                 med.loc[mask, "dataset"])]
    return med


def _pair(s: pd.DataFrame, model, metric, a, b, datasets=None) -> list[float]:
    """Per dataset (of `datasets`, or all): a's metric / b's."""
    g = s[s["model"] == model].pivot_table(index="dataset", columns="config", values=metric)
    if a not in g or b not in g:
        return []
    g = g.loc[[d for d in g.index if datasets is None or d in datasets]]
    r = (g[a] / g[b]).dropna()
    return [float(v) for v in r if math.isfinite(v) and v > 0]


def compare(s: pd.DataFrame, rows: pd.DataFrame, paper: pd.DataFrame | None) -> list[dict]:
    lines = []
    if paper is None:
        return lines
    for model in sorted(s["model"].unique()):
        for p in paper.itertuples():
            key = (p.config, p.versus if isinstance(p.versus, str) else "", p.metric)
            ours, what = math.nan, ""
            if key == ("ef5", "int4", "accuracy_change_pct") or key == ("ef5", "int8", "accuracy_change_pct"):
                r = _pair(s, model, "accuracy", "EF 5b", p.versus.upper())
                ours, what = (100 * (np.mean(r) - 1) if r else math.nan), f"accuracy EF 5b / {p.versus.upper()}"
            elif key == ("ef5", "int8", "ttft_change_pct"):
                r = _pair(s, model, "ttft_s", "EF 5b", "INT8")
                ours, what = (100 * (float(np.exp(np.mean(np.log(r)))) - 1) if r else math.nan), "TTFT EF 5b / INT8"
            elif p.metric == "ttft_speedup_max":  # the paper's per model: ours beside each
                r = _pair(s, model, "ttft_s", "EF 5b", "+pack")
                ours, what = (max(r) if r else math.nan), "TTFT EF 5b / +pack, max over datasets"
            elif key[0] == "ef5+pack+pipeline":
                r = _pair(s, model, "ttft_s", "+pipeline", "+pack", LONG if "mmlu" in str(p.dataset) else SHORT)
                ours, what = (100 * (float(np.exp(np.mean(np.log(r)))) - 1) if r else math.nan), \
                    f"TTFT +pipeline / +pack, {p.dataset}"
            else:
                continue
            pct = p.metric.endswith("_pct")
            paper_ratio = 1 + p.value / 100 if pct else p.value
            caps = rules.cap_reasons(rows[rows["model"] == model], PAPER_MODELS,
                                      device_matters=not p.metric.startswith("accuracy"))
            verdict = rules.NOT_RUN if not math.isfinite(ours) else rules.ratio_verdict(
                1 + ours / 100 if pct else ours, paper_ratio, caps=caps)
            if p.metric == "ttft_speedup_max" and isinstance(p.model, str) and p.model != model:
                label = f"{p.value:g}x ({p.model})"
            else:
                label = f"{p.value:+g}%" if pct else f"{p.value:g}x"
            lines.append({"model": model, "comparison": what, "ours": "–" if not math.isfinite(ours) else
                          (f"{ours:+.1f}%" if pct else f"{ours:.2f}x"), "paper": label, "verdict": verdict,
                          "_caps": caps if math.isfinite(ours) else [f"not run: no {what} pair in the store"]})
    return lines


def draw(s: pd.DataFrame, figures_dir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = sorted(s["model"].unique())
    fig, axes = plt.subplots(len(models), 2, figsize=(13, 3.8 * len(models)), squeeze=False)
    colors = dict(zip(CONFIGS, ("#c44e52", "#8c8c8c", "#8fb9dc", "#4c72b0", "#1f3f77")))
    for (ax_t, ax_a), model in zip(axes, models):
        g = s[s["model"] == model]
        datasets = [d for d in fig10.DATASETS if d in set(g["dataset"])]
        width = 0.8 / len(CONFIGS)
        for ax, metric, label in ((ax_t, "ttft_s", "cold TTFT / INT8's"), (ax_a, "accuracy", "accuracy / INT8's")):
            w = g.pivot_table(index="dataset", columns="config", values=metric)
            drawn = [name for name in CONFIGS if name in w and "INT8" in w]
            for j, name in enumerate(CONFIGS):
                if name not in drawn:
                    continue
                ys = [w.loc[d, name] / w.loc[d, "INT8"] if d in w.index else np.nan for d in datasets]
                ax.bar(np.arange(len(datasets)) - 0.4 + width * (j + 0.5), ys, width, label=name, color=colors[name])
            if not drawn:  # no INT8 rows: random weights have no accuracy, or INT8 was not run for this model
                ax.text(0.5, 0.5, f"no INT8 {metric} rows to normalise by",
                        transform=ax.transAxes, ha="center", fontsize=8, color="gray")
            ax.axhline(1, color="black", linewidth=0.6)
            ax.set_xticks(range(len(datasets)), datasets)
            ax.set_ylabel(label)
            ax.set_title(f"{model}: {label} (medians; +pack and +pipeline share EF 5b's accuracy)"
                         if metric == "accuracy" else f"{model}: {label} (medians)", fontsize=9)
            if drawn:
                ax.legend(fontsize=7, ncol=5)
    fig.suptitle("Figure 11 (ours): the ablation in our runtime", fontsize=9.5)
    fig.tight_layout()
    return output.save_figure(fig, NAME, figures_dir)


def one_condition(rows: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """selection.one_condition for the timings and, apart, for the accuracies (by dataset source and what scored them:
    the runtime or the fake-quant model; no device or flash setting applies to them)."""
    acc = rows["metric"] == "accuracy"
    timed, timed_note = selection.one_condition(rows[~acc])
    scored, scored_note = selection.one_condition(rows[acc].assign(scorer=selection.scoring_path(rows[acc])),
                                               ("source", "scorer"))
    return pd.concat([timed, scored]), " ".join(n for n in (timed_note, scored_note) if n)


def render(rows: pd.DataFrame, paper: pd.DataFrame | None, figures_dir: Path) -> Section:
    rows, left_out = one_condition(rows) if len(rows) else (rows, "")
    s = summary(rows) if len(rows) else pd.DataFrame()
    if s.empty:
        return output.not_run_section(NAME, TITLE, "no ablation rows in the store")
    figures = draw(s, figures_dir)
    lines = compare(s, rows, paper)
    verdict, count = rules.overall([line["verdict"] for line in lines])
    table = s.assign(ttft_s=s["ttft_s"].map(fmt), accuracy=s["accuracy"].map(fmt))
    tags = selection.labels(rows[rows["system"] == "edgeflow"])
    body = [f"![{TITLE}](figures/{figures[0].name})\n", "Labels: " + "; ".join(tags) + ".\n" if tags else "",
            selection.models_differ_note(set(s["model"]), PAPER_MODELS), left_out,
            "**The paper's statements**, ours beside them (ratio rule on 1 + change; means over datasets, no "
            "interval):\n", md_table(pd.DataFrame(lines)) if lines else "_(no paper values loaded)_\n",
            "\n**Our medians** per dataset and configuration:\n", md_table(table)]
    claims = rules.claims(NAME, lines, lambda line: f"{line['comparison']} ({line['model']})")
    return Section(NAME, TITLE, verdict, count, "\n".join(b for b in body if b), figures, claims=claims)


@register_artifact
class Fig11(SweepArtifact):
    NAME, TITLE, EXPERIMENTS, FILTERS = NAME, TITLE, EXPERIMENTS, FILTERS
    sweep, render = staticmethod(sweep), staticmethod(render)
