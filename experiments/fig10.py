"""Figure 10: cold-start TTFT (bars, log scale) and accuracy (lines) of llama.cpp, MNN, llm.npu+ and EdgeFlow at 4-7
average bits, per model and dataset; beside it our TTFT ratios (baseline / EdgeFlow) against the paper's.

Rows come from the store folders `ttft` (metric ttft_s, one row per repetition) and `accuracy` (metric accuracy, a
fraction). Bars are medians over repetitions with min-max error bars. The paper's per-bar values were lost in the text
extraction; its ratios (section 5.2) are the reference, and they summarise the figure over models and datasets.
"""
from __future__ import annotations

import itertools
import math
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd

from experiments import common
from experiments.common import Section, fmt, md_table
from harness.measure.workload import check_rows

NAME = "fig10"
TITLE = "Figure 10 - cold-start TTFT and accuracy per system, model and dataset"
EXPERIMENTS = ("ttft", "accuracy")

SYSTEMS = ("llamacpp", "mnn", "llmnpu", "edgeflow")
BASELINES = ("llamacpp", "mnn", "llmnpu")
BITS = (4, 5, 6, 7)
DATASETS = ("lambada", "winogrande", "openbookqa", "mmlu", "hellaswag")
PAPER_MODELS = {"llama3-8b", "phi3-3.8b"}
DISPLAY = {"llamacpp": "llama.cpp", "mnn": "MNN", "llmnpu": "llm.npu+", "edgeflow": "EF"}
# The quantizer (option, bits) whose fake-quant model stands for each baseline's accuracy: all keep INT8 weights
# (section 5.2); llm.npu's is per-tensor INT8 with shadow outliers. EdgeFlow's is swept over `bits`.
ACCURACY_QUANTIZER = {"llamacpp": ("int8", 8), "mnn": ("int8", 8), "llmnpu": ("shadow_outlier", 8)}
# Weight format each system's TTFT is measured with; the baselines bring their own (Q8_0 GGUF, MNN INT8, llm.npu).
EDGEFLOW_PACKING = "weightlet"


def sweep(models=("smollm2-135m",), datasets=DATASETS, systems=SYSTEMS, bits=BITS, device="local",
          flash_mbps: float | None = None, kinds=EXPERIMENTS, ttft_prompts: int = 3,
          eval_limit: int = 100) -> list[list[str]]:
    """Hydra override lists: for each model x dataset x system (x bits for EdgeFlow), one TTFT and one accuracy point.
    `flash_mbps` emulates a phone's flash for every system alike (device.flash_read_mbps). `ttft_prompts` prompts
    per dataset (each cold, x the protocol's repetitions) and `eval_limit` items per accuracy task keep the default
    run within ~20 minutes on a 2-core host; raise them for tighter error bars."""
    unknown = sorted(set(systems) - set(SYSTEMS))
    if unknown:
        raise ValueError(f"fig10: unknown system(s) {unknown}; allowed: {list(SYSTEMS)}")
    points = []
    for model, dataset, system in itertools.product(models, datasets, systems):
        for b in (bits if system == "edgeflow" else (None,)):
            base = [f"model={model}", f"system={system}", f"dataset={dataset}"]
            quant = [f"quantizer.budget_bits={float(b)}"] if b is not None else []
            if "ttft" in kinds:
                dev = [f"device={device}"] + ([f"device.flash_read_mbps={float(flash_mbps)}"] if flash_mbps else [])
                fmt_ = ["quantizer=edgeflow", *quant, f"packing={EDGEFLOW_PACKING}"] if system == "edgeflow" else []
                points.append(["experiment=ttft", *base, *fmt_, *dev, f"experiment.extra.n_prompts={ttft_prompts}"])
            if "accuracy" in kinds:
                option, qbits = ("edgeflow", b) if system == "edgeflow" else ACCURACY_QUANTIZER[system]
                points.append(["experiment=accuracy", *base, f"quantizer={option}",
                               f"quantizer.budget_bits={float(qbits)}", f"experiment.eval_limit={eval_limit}"])
    return points


# --- tidy our rows into series --------------------------------------------------------------------------------------------

def series_name(system: str, bits) -> str:
    if system == "edgeflow":
        return f"EF {bits:g}b" if bits is not None and not pd.isna(bits) else "EF"
    return DISPLAY.get(system, system)


def _with_series(df: pd.DataFrame) -> pd.DataFrame:
    """Figure 10's rows among the store's: other artifacts share the ttft/accuracy folders (Figure 12 evaluates
    other quantizers, ablations other packings), so EdgeFlow rows must be its own quantizer and packing."""
    ef = df["system"] == "edgeflow"
    own = ~ef | ((df["quantizer"].isna() | (df["quantizer"] == "edgeflow"))
                 & (df["packing"].isna() | (df["packing"] == EDGEFLOW_PACKING)))
    df = df[df["system"].isin(SYSTEMS) & own].copy()
    df["series"] = [series_name(s, b) for s, b in zip(df["system"], df["bits"])]
    return df


def series_order(series: set[str]) -> list[str]:
    base = [DISPLAY[s] for s in BASELINES if DISPLAY[s] in series]
    ef = sorted((s for s in series if s.startswith("EF")), key=lambda s: float(s[3:-1]) if s != "EF" else 0)
    return base + ef + sorted(series - set(base) - set(ef))


def tidy(rows: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """ttft / accuracy summaries (median, min, max, n per model, dataset, series) and the unrun reasons."""
    rows = _with_series(rows)
    check_rows(common.ok_rows(rows, "ttft_s"))  # the systems compared did the same work (harness/measure/workload.py)
    keys = ["model", "dataset", "series"]
    return {
        "ttft": common.summarize(common.ok_rows(rows, "ttft_s"), keys),
        "accuracy": common.summarize(common.ok_rows(rows, "accuracy"), keys),
        "unrun": common.unrun_reasons(rows),
        "prompt_tokens": rows[(rows["status"] == "ok") & rows["prompt_tokens"].notna()]
        .groupby(["model", "dataset"])["prompt_tokens"].agg(["min", "max"]).reset_index(),
    }


def ratios(ttft: pd.DataFrame) -> pd.DataFrame:
    """Our baseline/EdgeFlow TTFT ratio per model, baseline and EdgeFlow bits: the geometric mean over the datasets
    where both ran of median(baseline) / median(EdgeFlow)."""
    out = []
    for model, per_model in ttft.groupby("model"):
        wide = per_model.pivot_table(index="dataset", columns="series", values="median")
        for base, ef in itertools.product(BASELINES, [c for c in wide.columns if c.startswith("EF ")]):
            name = DISPLAY[base]
            if name not in wide.columns:
                continue
            r = (wide[name] / wide[ef]).dropna()
            if len(r):
                out.append({"model": model, "system": base, "bits": float(ef[3:-1]),
                            "ratio": float(np.exp(np.log(r).mean())), "datasets": len(r)})
    return pd.DataFrame(out, columns=["model", "system", "bits", "ratio", "datasets"])


def accuracy_drops(acc: pd.DataFrame) -> pd.DataFrame:
    """EdgeFlow's accuracy drop vs the mean of the baselines, in percentage points, averaged over datasets."""
    out = []
    for model, per_model in acc.groupby("model"):
        wide = per_model.pivot_table(index="dataset", columns="series", values="median")
        base_cols = [DISPLAY[b] for b in BASELINES if DISPLAY[b] in wide.columns]
        if not base_cols:
            continue
        base_mean = wide[base_cols].mean(axis=1)
        for ef in (c for c in wide.columns if c.startswith("EF ")):
            d = (base_mean - wide[ef]).dropna() * 100
            if len(d):
                out.append({"model": model, "bits": float(ef[3:-1]), "drop_pp": float(d.mean()), "datasets": len(d)})
    return pd.DataFrame(out, columns=["model", "bits", "drop_pp", "datasets"])


LONG_PROMPTS = ("mmlu", "hellaswag")


def llmnpu_statements(t: dict[str, pd.DataFrame]) -> list[dict]:
    """Our numbers for the paper's two llm.npu+ statements: the TTFT ratio range on long prompts (MMLU, HellaSwag;
    EdgeFlow at its default 5 bits) and the largest accuracy gain over llm.npu+ (percentage points, mean over
    datasets, max over bits)."""
    out = []
    ttft = t["ttft"]
    for model, per in ttft.groupby("model"):
        wide = per.pivot_table(index="dataset", columns="series", values="median")
        if {"llm.npu+", "EF 5b"} <= set(wide.columns):
            r = (wide["llm.npu+"] / wide["EF 5b"]).reindex(list(LONG_PROMPTS)).dropna()
            if len(r):
                out.append({"model": model, "metric": "ttft_ratio_long", "min": float(r.min()), "max": float(r.max())})
    for model, per in t["accuracy"].groupby("model"):
        wide = per.pivot_table(index="dataset", columns="series", values="median")
        efs = [c for c in wide.columns if c.startswith("EF ")]
        if "llm.npu+" in wide.columns and efs:
            gain = max(100 * (wide[ef] - wide["llm.npu+"]).dropna().mean() for ef in efs)
            out.append({"model": model, "metric": "accuracy_gain_max", "min": gain, "max": gain})
    return out


# --- figure -----------------------------------------------------------------------------------------------------------------

def _colors(order: list[str]) -> dict[str, tuple]:
    import matplotlib

    base = {"llama.cpp": "#8c564b", "MNN": "#e377c2", "llm.npu+": "#7f7f7f"}
    efs = [s for s in order if s.startswith("EF")]
    blues = matplotlib.colormaps["Blues"]
    ef = {s: blues(0.45 + 0.5 * i / max(1, len(efs) - 1)) for i, s in enumerate(efs)}
    return {s: base.get(s, ef.get(s, "#bcbd22")) for s in order}


def _unrun_reason(unrun: pd.DataFrame, model: str, dataset: str, series: str) -> str:
    hit = unrun[(unrun["model"] == model) & (unrun["series"] == series)]
    same = hit[hit["dataset"] == dataset]
    hit = same if len(same) else hit  # a system that cannot run here usually says so once per dataset
    if hit.empty:
        return "not run: no rows"
    return hit["reason"].iloc[-1]


def _short(text: str, n: int = 38) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _dataset_label(dataset: str, tokens: pd.DataFrame, model: str, bands: pd.DataFrame | None) -> str:
    """'lambada / 78–80 tok / paper 59–97': our prompt lengths, and Table 3's."""
    t = tokens[(tokens["model"] == model) & (tokens["dataset"] == dataset)]
    label = dataset + (f"\n{int(t['min'].iloc[0])}–{int(t['max'].iloc[0])} tok" if len(t) else "")
    p = bands[bands["dataset"] == dataset] if bands is not None else pd.DataFrame()
    if len(p):
        label += f"\npaper {int(p['prompt_tokens_min'].iloc[0])}–{int(p['prompt_tokens_max'].iloc[0])}"
    return label


def _main_panel(ax, model, t, order, colors, expected, acc_label):
    """Bars: median TTFT per dataset and series (log); lines: accuracy on a twin axis; 'not run' as text."""
    import matplotlib.transforms as mtransforms

    datasets = [d for d in DATASETS if d in expected["datasets"]] + sorted(expected["datasets"] - set(DATASETS))
    width = 0.84 / max(1, len(order))
    ttft = t["ttft"][t["ttft"]["model"] == model]
    acc = t["accuracy"][t["accuracy"]["model"] == model]
    ax2 = ax.twinx()
    text_tf = mtransforms.blended_transform_factory(ax.transData, ax.transAxes)
    labelled: set[str] = set()
    for i, dataset in enumerate(datasets):
        acc_x, acc_y = [], []
        for j, series in enumerate(order):
            x = i - 0.42 + width * (j + 0.5)
            hit = ttft[(ttft["dataset"] == dataset) & (ttft["series"] == series)]
            if len(hit):
                m, lo, hi = hit[["median", "min", "max"]].iloc[0]
                ax.bar(x, m, width * 0.92, color=colors[series], edgecolor="black", linewidth=0.4,
                       label=None if series in labelled else series)
                labelled.add(series)
                ax.errorbar(x, m, yerr=[[m - lo], [hi - m]], color="black", capsize=1.5, linewidth=0.7)
            else:
                reason = _short(_unrun_reason(t["unrun"], model, dataset, series))
                ax.text(x, 0.02, reason, transform=text_tf, rotation=90, fontsize=6, ha="center", va="bottom",
                        color="#b00000")
            a = acc[(acc["dataset"] == dataset) & (acc["series"] == series)]
            if len(a):
                acc_x.append(x)
                acc_y.append(100 * a["median"].iloc[0])
        if acc_x:
            ax2.plot(acc_x, acc_y, "-D", color="black", markersize=3.5, linewidth=1,
                     label=None if "accuracy" in labelled else acc_label)
            labelled.add("accuracy")
    ax.set_yscale("log")
    ax.set_ylabel("cold TTFT (s), log scale")
    ax.set_xticks(range(len(datasets)))
    bands = common.load_paper("table3")
    ax.set_xticklabels([_dataset_label(d, t["prompt_tokens"], model, bands) for d in datasets], fontsize=8)
    ax.set_xlim(-0.5, len(datasets) - 0.5)
    ax2.set_ylim(0, 100)
    ax2.set_ylabel("accuracy (%)")
    if ttft.empty:
        ax.set_ylim(0.1, 10)
    else:  # bars on a log axis start at its bottom: leave a decade below the fastest so ratios read as heights
        ax.set_ylim(10 ** math.floor(math.log10(ttft["min"].min()) - 0.5), ttft["max"].max() * 2.5)
    handles, names = ax.get_legend_handles_labels()
    h2, n2 = ax2.get_legend_handles_labels()
    if handles or h2:
        ax.legend(handles + h2, names + n2, fontsize=7, ncol=2, loc="upper left", framealpha=0.85)


def _ratio_panel(ax, model, ours: pd.DataFrame, paper: pd.DataFrame | None, t, expected):
    """Grouped bars per baseline: our ratio (solid) and the paper's (hatched) at each EdgeFlow bit-width."""
    import matplotlib

    ours = ours[ours["model"] == model]
    pr = paper[paper["metric"] == "ttft_ratio"] if paper is not None else pd.DataFrame(columns=["system", "bits"])
    bits = sorted(set(ours["bits"]) | set(pr["bits"].dropna()))
    blues = matplotlib.colormaps["Blues"]
    width = 0.84 / max(1, 2 * len(bits))
    for i, base in enumerate(BASELINES):
        k = 0
        for b in bits:
            color = blues(0.45 + 0.5 * bits.index(b) / max(1, len(bits) - 1))
            for source, frame in (("ours", ours), ("paper", pr)):
                hit = frame[(frame["system"] == base) & (frame["bits"] == b)]
                x = i - 0.42 + width * (k + 0.5)
                k += 1
                if hit.empty:
                    continue
                v = float(hit["ratio" if source == "ours" else "value"].iloc[0])
                ax.bar(x, v, width * 0.9, color=color if source == "ours" else "white", edgecolor=color,
                       hatch="////" if source == "paper" else None, linewidth=1.2)
                ax.text(x, v, f"{v:.2f}", ha="center", va="bottom", fontsize=5.5, rotation=90)
        if ours[ours["system"] == base].empty:
            series = DISPLAY[base]
            measured = set(t["ttft"].loc[t["ttft"]["model"] == model, "series"])
            if series in measured:
                reason = "no EdgeFlow TTFT on the same datasets"
            elif series in expected["series"]:
                reason = _unrun_reason(t["unrun"], model, "", series)
            else:
                reason = "not in the sweep"
            ax.text(i, 0.97, "\n".join(textwrap.wrap("ours: " + reason, 24)[:3]), ha="center", va="top",
                    fontsize=6, color="#b00000", transform=ax.get_xaxis_transform())
    ax.axhline(1, color="black", linewidth=0.6, linestyle=":")
    ax.set_xticks(range(len(BASELINES)))
    ax.set_xticklabels([DISPLAY[b] for b in BASELINES], fontsize=8)
    ax.set_ylabel("TTFT ratio: baseline / EdgeFlow (×)")
    from matplotlib.patches import Patch

    handles = [Patch(facecolor=blues(0.45 + 0.5 * bits.index(b) / max(1, len(bits) - 1)), label=f"ours, EF {b:g}b")
               for b in bits if b in set(ours["bits"])]
    handles += [Patch(facecolor="white", edgecolor="gray", hatch="////", label="paper (section 5.2)")]
    ax.legend(handles=handles, fontsize=6.5, loc="upper center", bbox_to_anchor=(0.5, -0.09), ncol=3, frameon=False)
    ax.set_title("speedup vs baselines: ours (this model) beside the paper's\n(paper: over its models and datasets)",
                 fontsize=9)
    ax.set_ylim(0, max([1.5, *ours["ratio"], *pr["value"]]) * 1.4)


def draw(rows: pd.DataFrame, paper: pd.DataFrame | None, figures_dir: Path, name: str = NAME) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = tidy(rows)
    ours = ratios(t["ttft"])
    series_rows = _with_series(rows)
    models = sorted(series_rows["model"].dropna().unique()) or ["(no model)"]
    colors = _colors(series_order(set(series_rows["series"])))
    fig, axes = plt.subplots(len(models), 2, figsize=(16, 4.6 * len(models)), squeeze=False,
                             gridspec_kw={"width_ratios": [3.2, 1.3]})
    for r, model in enumerate(models):
        per_model = series_rows[series_rows["model"] == model]
        expected = {"datasets": set(per_model["dataset"].dropna()), "series": set(per_model["series"])}
        proxy = ((per_model["metric"] == "accuracy") & (per_model["label"] == "proxy")).any()
        acc_label = "accuracy, proxy tasks (right axis)" if proxy else "accuracy (right axis)"
        _main_panel(axes[r][0], model, t, series_order(expected["series"]), colors, expected, acc_label)
        tag = "; ".join(common.labels(per_model))
        axes[r][0].set_title(f"{model} — {tag}", fontsize=9)
        _ratio_panel(axes[r][1], model, ours, paper, t, expected)
    fig.suptitle("Figure 10 (ours): cold-start TTFT (bars: median, error bars min–max over prompts and repetitions) "
                 "and accuracy (line); red text: configurations that did not run", fontsize=10)
    fig.tight_layout()
    return common.save_figure(fig, name, figures_dir)


# --- report -----------------------------------------------------------------------------------------------------------------

def _cell(row) -> str:
    return f"{fmt(row['median'])} [{fmt(row['min'])}–{fmt(row['max'])}] n={int(row['n'])}"


def render(rows: pd.DataFrame, paper: pd.DataFrame | None, figures_dir: Path) -> Section:
    if rows.empty:
        return common.not_run_section(NAME, TITLE, "no rows in the store")
    t = tidy(rows)
    figures = draw(rows, paper, figures_dir)
    ours = ratios(t["ttft"])
    verdicts, lines = [], []
    paper_ratio = paper[paper["metric"] == "ttft_ratio"] if paper is not None else pd.DataFrame()
    for p in paper_ratio.itertuples():
        hit = ours[(ours["system"] == p.system) & (ours["bits"] == p.bits)]
        if hit.empty:
            verdicts.append(common.NOT_RUN)
            lines.append({"model": "–", "baseline": DISPLAY[p.system], "EF bits": f"{p.bits:g}", "ours": "–",
                          "paper": f"{p.value:.2f}", "ours / paper": "–", "verdict": common.NOT_RUN})
        for h in hit.itertuples():
            v = common.ratio_verdict(h.ratio, p.value)
            verdicts.append(v)
            lines.append({"model": h.model, "baseline": DISPLAY[p.system], "EF bits": f"{p.bits:g}",
                          "ours": f"{h.ratio:.2f} ({h.datasets} datasets)", "paper": f"{p.value:.2f}",
                          "ours / paper": f"{h.ratio / p.value:.2f}", "verdict": v})
    drops = accuracy_drops(t["accuracy"])
    drop_lines = []
    paper_drop = paper[paper["metric"] == "accuracy_drop_pct"] if paper is not None else pd.DataFrame()
    for p in paper_drop.itertuples():
        for h in drops[drops["bits"] == p.bits].itertuples():
            v = common.points_verdict(h.drop_pp, p.value)
            verdicts.append(v)
            drop_lines.append({"model": h.model, "EF bits": f"{p.bits:g}", "ours (pp)": f"{h.drop_pp:.2f}",
                               "paper (%)": f"{p.value:.2f}", "difference": f"{h.drop_pp - p.value:+.2f}",
                               "verdict": v})
    npu_lines = []
    if paper is not None:
        stated = {m: v for m, v in zip(paper["metric"], paper["value"])}
        for h in llmnpu_statements(t):
            if h["metric"] == "ttft_ratio_long" and "ttft_ratio_min" in stated:
                lo, hi = stated["ttft_ratio_min"], stated["ttft_ratio_max"]
                v = common.ratio_verdict((h["min"] + h["max"]) / 2, (lo + hi) / 2)
                ours_txt, paper_txt = f"{h['min']:.2f}–{h['max']:.2f}×", f"{lo:.2f}–{hi:.2f}×"
                what = "llm.npu+ / EF 5b TTFT on MMLU and HellaSwag (midpoints compared)"
            elif h["metric"] == "accuracy_gain_max" and "accuracy_gain_pct_max" in stated:
                v = common.points_verdict(h["max"], stated["accuracy_gain_pct_max"])
                ours_txt, paper_txt = f"{h['max']:.2f} pp", f"{stated['accuracy_gain_pct_max']:.2f}%"
                what = "largest accuracy gain over llm.npu+ (max over bits of the mean over datasets)"
            else:
                continue
            verdicts.append(v)
            npu_lines.append({"model": h["model"], "statement": what, "ours": ours_txt, "paper": paper_txt,
                              "verdict": v})
    verdict, count = common.overall(verdicts)
    if verdict == common.NOT_RUN:
        summary = "no baseline/EdgeFlow pair measured on the same model and dataset"
    else:
        summary = count
    tags = common.labels(rows)
    note = common.models_differ_note(set(t["ttft"]["model"]) | set(t["accuracy"]["model"]), PAPER_MODELS)
    body = [f"![{TITLE}](figures/{figures[0].name})\n", "Labels: " + "; ".join(tags) + ".\n" if tags else "",
            f"{note}\n" if note else "",
            "**TTFT ratios** (baseline / EdgeFlow; ours: geometric mean over the datasets where both ran). "
            "The paper's ratios summarise its Figure 10 over Llama3-8B and Phi3-3.8B and five datasets.\n",
            md_table(pd.DataFrame(lines)) if lines else "_(no paper ratios loaded)_\n"]
    if drop_lines:
        body += ["\n**Accuracy drop** of EdgeFlow vs the mean of the baselines (ours in percentage points, averaged "
                 "over datasets):\n", md_table(pd.DataFrame(drop_lines))]
    if npu_lines:
        body += ["\n**llm.npu+ statements** of section 5.2:\n", md_table(pd.DataFrame(npu_lines))]
    for metric, unit in (("ttft", "s"), ("accuracy", "fraction")):
        s = t[metric]
        if s.empty:
            continue
        s = s.assign(cell=[_cell(r) for _, r in s.iterrows()])
        wide = s.pivot_table(index=["model", "dataset"], columns="series", values="cell", aggfunc="first")
        wide = wide[[c for c in series_order(set(wide.columns))]].reset_index()
        body += [f"\n**Our {metric}** ({unit}; median [min–max] over prompts and repetitions, n rows):\n",
                 md_table(wide)]
    if not t["unrun"].empty:
        u = t["unrun"].groupby(["series", "reason"]).size().reset_index(name="configurations")
        body += ["\n**Did not run:**\n", md_table(u)]
    return Section(NAME, TITLE, verdict, summary, "\n".join(b for b in body if b), figures)
