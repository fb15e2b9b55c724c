"""Compare quantizers - a user's beside the paper's - on every axis at once: quality, size, making time, cold TTFT.

`make compare-quantizers QUANTIZERS=rtn_clip,edgeflow,cmpq BITS=4,5,6,7` (default: every registered quantizer at
4..7 bits on the default model). For each model, quantizer and budget it measures, as Hydra points through the same
runner as every other artifact (rows in the store folder `compare-quantizers`, resumable):
  perplexity   the local corpus's perplexity split (a proxy); WikiText-2 too when the hub is reachable
  accuracy     the local proxy tasks (lambada-local, hellaswag-local), `eval_limit` items each
  fidelity     mean KL(FP16 || quantized) and top-1 agreement on held-out text (never calibration text), effective
               bits per weight, packed file size, calibration and quantization time (experiment=fidelity)
  ttft         cold TTFT of the packed model in our runtime (system=edgeflow), natively and, with flash_mbps, with
               the flash throttled to that rate; a method the runtime cannot run gets "not run" and the reason
plus the FP16 model's perplexity and accuracy as the reference. Every method is drawn the same way: the paper's
baselines are series like the user's. Intervals: 95% t-interval over windows for KL and top-1, 95% Wilson interval
over the items for accuracy (the rows' `items`), min..max over repetitions for TTFT.
"""
from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from experiments import output, rules, selection, stats
from experiments.base import SweepArtifact, register_artifact
from experiments.output import Section, md_table
from harness.registry import conf_group

NAME = "compare-quantizers"
TITLE = "Compare quantizers - quality, size and cold TTFT per method and budget"
EXPERIMENTS = (NAME,)
BITS = (4, 5, 6, 7)
DATASETS = ("lambada-local", "hellaswag-local")
PACKING = "weightlet"
FP16_NAMES = ("fp", "fp16", "none")
# The fidelity kind's default text (the corpus's held-out split); others (python-docs: English unlike the corpus) are
# columns of their own, "KL ..., python-docs"
HELD_OUT = "ppl-local"
# Rendering selects rows by model only: the FP16 reference has no quantizer and the fidelity/TTFT rows no task, and
# every quantizer measured so far belongs in the comparison.
FILTERS = {"model": "models"}


def options() -> dict[str, str]:
    """Registered quantizer name -> the conf/quantizer option that selects it (the option named like it, else the
    first whose YAML names it: `uniform` is int4.yaml; its budget is overridden per point anyway)."""
    import yaml

    from harness.quant import REGISTRY

    out: dict[str, str] = {}
    for path in sorted(conf_group("quantizer").glob("*.yaml")):
        name = (yaml.safe_load(path.read_text()) or {}).get("name")
        if name in REGISTRY and (name not in out or path.stem == name):
            out[name] = path.stem
    return out


def runtime_reason(name: str) -> str:
    """'' when our runtime can run `name`'s artifacts, else why not (the quantizer class says)."""
    from harness.quant import REGISTRY

    cls = REGISTRY.get(name)
    if cls is None or cls.runtime_compatible:
        return ""
    return cls.runtime_incompatible_reason or f"{name} declares runtime_compatible = False"


def sweep(models=("smollm2-135m",), quantizers=None, bits=BITS, datasets=DATASETS, flash_mbps: float | None = None,
          eval_limit: int = 50, ppl_windows: int = 2, fidelity_windows: int = 6, ttft_prompt_tokens: int = 128,
          ttft_repetitions: int = 3, wikitext2: bool | None = None, ppl_window: int = 2048,
          fidelity_window: int = 512, npu: str | None = None,
          fidelity_texts: tuple[str, ...] | str = (HELD_OUT,)) -> list[list[str]]:
    """Hydra override lists. `quantizers` are registered names (default: all); `flash_mbps` adds an emulated-flash
    TTFT beside the native one; `eval_limit` items per task, `ppl_windows` 2048-token windows and `fidelity_windows`
    512-token windows keep a 4-method x 4-budget run on the 135M model within ~1 h on a busy 2-core host.
    `wikitext2`: None = when the hub is reachable. `ppl_window`/`fidelity_window` (tokens) exist for tiny test models.
    `npu` (a conf/npu option, e.g. sm8750): the fidelity points also run the quantized linears on QNN's HTP simulator
    for that SoC (the 'KL HTP' column, simulated; a few minutes per point on the default model), and a quantizer with
    settings for NPUs (conf/npu_recipe/) is that artifact at every point, its TTFT and accuracy included.
    `fidelity_texts`: the texts KL and top-1 are measured on (harness/data/streams.py fidelity_tokens), one fidelity
    point each, e.g. `--param fidelity_texts=ppl-local,python-docs` for out-of-domain English beside the corpus."""
    from harness.config import ConfigError
    from harness.npu.recipe import recipe_overrides

    known = options()
    names = list(quantizers) if quantizers else sorted(known)
    unknown = [q for q in names if q not in known]
    if unknown:
        raise ConfigError(f"{NAME}: unknown quantizer(s) {unknown}; registered with a conf/quantizer YAML: "
                          f"{sorted(known)}")
    if wikitext2 is None:
        from harness.data.hub import hub_status

        wikitext2 = not hub_status()
    ppl_sources = ["local", "wikitext2"] if wikitext2 else ["local"]
    texts = [fidelity_texts] if isinstance(fidelity_texts, str) else list(fidelity_texts)
    exp = [f"experiment.name={NAME}"]
    ppl = [f"experiment.ppl_max_windows={ppl_windows}", f"experiment.extra.ppl_window={ppl_window}"]
    points = []
    for model in models:
        m = [f"model={model}"]
        # The FP16 reference: perplexity and accuracy of the unquantized model.
        points += [["experiment=perplexity", *exp, *m, f"experiment.extra.ppl_source={s}", *ppl] for s in ppl_sources]
        points += [["experiment=accuracy", *exp, *m, f"dataset={d}", f"experiment.eval_limit={eval_limit}"]
                   for d in datasets]
        for name in names:
            for b in (b for b in bits if selection.quantizer_accepts(name, b)):
                q = [f"quantizer={known[name]}", f"quantizer.budget_bits={float(b)}",
                     *(recipe_overrides(name, float(b)) if npu else [])]
                points += [["experiment=fidelity", *exp, *m, *q, f"packing={PACKING}",
                            f"experiment.extra.fidelity_windows={fidelity_windows}",
                            f"experiment.extra.fidelity_window={fidelity_window}", *([f"npu={npu}"] if npu else []),
                            *([f"+experiment.extra.fidelity_text={text}"] if text != HELD_OUT else [])]
                           for text in texts]
                points += [["experiment=perplexity", *exp, *m, *q, f"experiment.extra.ppl_source={s}", *ppl]
                           for s in ppl_sources]
                points += [["experiment=accuracy", *exp, *m, *q, f"dataset={d}", f"experiment.eval_limit={eval_limit}"]
                           for d in datasets]
                if runtime_reason(name):
                    continue  # rendered as "not run" with the quantizer's reason
                for mbps in (None, flash_mbps) if flash_mbps else (None,):
                    dev = [f"device.flash_read_mbps={float(mbps)}"] if mbps else []
                    points.append(["experiment=ttft", *exp, *m, *q, "system=edgeflow", f"packing={PACKING}",
                                   f"experiment.extra.prompt_tokens={ttft_prompt_tokens}", "experiment.extra.n_prompts=1",
                                   f"protocol.repetitions={ttft_repetitions}", "protocol.busy_policy=flag", *dev])
    return points


# --- from rows to one table per model -----------------------------------------------------------------------------------

def _ci(values: pd.Series) -> tuple[float, float]:
    from harness.eval.intervals import mean_ci95

    return mean_ci95(list(values))


# The fidelity kind's other measurements of the same artifact (metric suffix -> column): the runtime itself, QNN's HTP
# simulator computing the quantized linears (with `npu`), and the fake-quant model with float outputs (a CPU-only
# system, which no NPU computes), per-token dynamic or float activations, which locate a quantizer's error.
KL_VARIANTS = {"_runtime": "runtime", "_htp": "HTP (simulated)", "_float_outputs": "CPU only (float outputs)",
               "_dynamic": "dynamic act.", "_weight_only": "weight-only"}


def table(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per (model, quantizer, bits) with every metric, its interval and the TTFT 'not run' reasons."""
    ok = rows[(rows["status"] == "ok") & rows["value"].notna()].copy()
    ok["quantizer"] = ok["quantizer"].fillna("fp16").where(~ok["quantizer"].isin(FP16_NAMES), "fp16")
    ok.loc[ok["quantizer"] == "fp16", "bits"] = 16.0
    out: dict[tuple, dict] = {}

    def cell(key) -> dict:
        return out.setdefault(key, {"model": key[0], "quantizer": key[1], "bits": key[2]})

    for key, g in ok.groupby(["model", "quantizer", "bits"], dropna=False):
        c = cell(key)
        for metric in ("effective_bits", "packed_mb", "artifact_mb", "calibrate_s", "quantize_s"):
            v = g.loc[g["metric"] == metric, "value"]
            if len(v):
                c[metric] = float(v.iloc[-1])
        for metric in (f"{m}{v}" for m in ("kl_fp16", "top1_agreement") for v in ("", *KL_VARIANTS)):
            mine = g[g["metric"] == metric]
            for text, per_text in mine.groupby(mine["dataset"].fillna(HELD_OUT)):  # one column per text
                col = metric if text == HELD_OUT else f"{metric} {text}"
                c[col], c[f"{col}_ci"] = _ci(per_text.drop_duplicates("repetition", keep="last")["value"])
        ppl = g[(g["metric"] == "perplexity") & g["dataset"].fillna("").str.startswith("ppl-")]  # not lm-eval's
        for source, v in ppl.groupby("dataset")["value"]:
            c[f"ppl {str(source).removeprefix('ppl-')}"] = float(v.iloc[-1])
        acc = g[g["metric"] == "accuracy"]
        for dataset, a in acc.groupby("dataset"):
            value, items = float(a["value"].iloc[-1]), a["items"].iloc[-1]
            c[f"acc {dataset}"] = value
            # the Wilson interval over the items the accuracy is a share of (the typed column, not the notes)
            c[f"acc {dataset}_lo"], c[f"acc {dataset}_hi"] = (stats.wilson(value * items, int(items))
                                                              if pd.notna(items) else (math.nan, math.nan))
        t = g[g["metric"] == "ttft_s"]
        for mbps, tt in t.groupby(t["flash_emulated_mbps"].fillna(0)):
            col = "ttft native" if mbps == 0 else f"ttft {mbps:g} MB/s"
            c[col], c[f"{col}_min"], c[f"{col}_max"] = tt["value"].median(), tt["value"].min(), tt["value"].max()
    df = pd.DataFrame(list(out.values()))
    if df.empty:
        return df
    # Why a method has no TTFT: its quantizer says the runtime cannot run it, or the run failed / was not run.
    df["ttft_reason"] = [runtime_reason(q) if q != "fp16" else "" for q in df["quantizer"]]
    bad = selection.unrun_reasons(rows[rows["system"] == "edgeflow"])  # the TTFT points' failures
    for r in bad.itertuples():
        mask = (df["model"] == r.model) & (df["quantizer"] == r.quantizer) & (df["bits"] == r.bits)
        df.loc[mask & (df["ttft_reason"] == ""), "ttft_reason"] = r.reason
    return df.sort_values(["model", "quantizer", "bits"], key=lambda s: s.map(_order) if s.name == "quantizer" else s)


def _order(q: str) -> str:
    return "0" if q == "fp16" else f"1{q}"


def _pm(v, ci, scale=1.0, digits=3) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "–"
    text = output.fmt(v * scale, digits)
    if ci is not None and isinstance(ci, float) and math.isfinite(ci):
        text += f" ± {output.fmt(ci * scale, 2)}"
    return text


def _between(v, lo, hi, scale=1.0) -> str:
    """'45.0 [40.1–50.2]' (an asymmetric interval: Wilson's), or the value alone without one."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "–"
    if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)):
        return f"{output.fmt(v * scale, 3)} (items unknown)"
    return f"{output.fmt(v * scale, 3)} [{output.fmt(lo * scale, 3)}–{output.fmt(hi * scale, 3)}]"


def _ttft(r, col: str, short: bool = False) -> str:
    v = r.get(col)
    if v is None or not math.isfinite(v):
        if not r.get("ttft_reason"):
            return "–"
        return "not run †" if short else f"not run: {r['ttft_reason']}"
    return f"{v:.3f} [{r[col + '_min']:.3f}..{r[col + '_max']:.3f}]"


def _other_text_columns(df: pd.DataFrame) -> list[str]:
    """The KL columns measured on a text other than the held-out one, in KL_VARIANTS' order."""
    order = ["kl_fp16", *(f"kl_fp16{v}" for v in KL_VARIANTS)]
    cols = [c for c in df.columns if c.startswith("kl_fp16") and " " in c and not c.endswith("_ci")]
    return sorted(cols, key=lambda c: (c.split(" ", 1)[1], order.index(c.split(" ", 1)[0])))


def _ttft_columns(df: pd.DataFrame) -> list[str]:
    """'ttft native' first, then the emulated flash rates in increasing order."""
    cols = [c for c in df.columns if c.startswith("ttft ") and not c.endswith(("_min", "_max"))]
    return sorted(cols, key=lambda c: (c != "ttft native", float(c.split()[1]) if c != "ttft native" else 0.0))


def display(df: pd.DataFrame, short: bool = False) -> pd.DataFrame:
    """The table as text: one line per method and budget, intervals beside the values (`short`: "not run †", the
    reasons given once below the figure's table)."""
    ttft_cols = _ttft_columns(df)
    ppl_cols = sorted(c for c in df.columns if c.startswith("ppl "))
    acc_cols = sorted(c for c in df.columns if c.startswith("acc ") and not c.endswith(("_lo", "_hi")))
    lines = []
    for _, r in df.iterrows():
        r = r.to_dict()
        line = {"method": r["quantizer"], "bits": "16 (FP)" if r["quantizer"] == "fp16" else f"{r['bits']:g}",
                "eff. bits/w": output.fmt(r.get("effective_bits"), 3),
                "packed MB": output.fmt(r.get("packed_mb"), 3) if r["quantizer"] != "fp16" else "–",
                "quantize s": output.fmt(r.get("quantize_s"), 3)}
        for c in ppl_cols:
            line[c] = output.fmt(r.get(c), 4)
        for c in acc_cols:
            line[f"{c} %"] = _between(r.get(c), r.get(f"{c}_lo"), r.get(f"{c}_hi"), 100)
        line["KL vs FP16"] = _pm(r.get("kl_fp16"), r.get("kl_fp16_ci"))
        line["top-1 agree %"] = _pm(r.get("top1_agreement"), r.get("top1_agreement_ci"), 100, 3)
        for suffix, name in KL_VARIANTS.items():
            if f"kl_fp16{suffix}" in df.columns:
                line[f"KL {name}"] = _pm(r.get(f"kl_fp16{suffix}"), r.get(f"kl_fp16{suffix}_ci"))
        for col in _other_text_columns(df):  # "kl_fp16_htp python-docs" -> "KL HTP (simulated), python-docs"
            metric, text = col.split(" ", 1)
            name = "vs FP16" if metric == "kl_fp16" else KL_VARIANTS[metric.removeprefix("kl_fp16")]
            line[f"KL {name}, {text}"] = _pm(r.get(col), r.get(f"{col}_ci"))
        for c in ttft_cols:
            line[f"cold {c.replace('ttft ', 'TTFT ')} s"] = "–" if r["quantizer"] == "fp16" else _ttft(r, c, short)
        lines.append(line)
    return pd.DataFrame(lines)


# --- figure ---------------------------------------------------------------------------------------------------------------

def pareto(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The non-dominated points (lower x and lower y are better), sorted by x."""
    front, best = [], math.inf
    for x, y in sorted(points):
        if y < best:
            front.append((x, y))
            best = y
    return front


MARKERS = "osD^vP*Xh<>"


def _ttft_unrun(df: pd.DataFrame, ttft_cols: list[str]) -> dict[str, str]:
    """quantizer -> why a cold TTFT of it is missing (its first reason)."""
    reasons: dict[str, str] = {}
    if "ttft_reason" in df:
        for _, r in df[df["ttft_reason"].fillna("") != ""].iterrows():
            if not all(math.isfinite(r.get(c, math.nan)) for c in ttft_cols):
                reasons.setdefault(r["quantizer"], r["ttft_reason"])
    return reasons


def drawn_kl(df: pd.DataFrame) -> tuple[str, str]:
    """The KL column the panels draw and what computed it: QNN HTP's simulator where the run has it (npu=<soc>: the
    numbers issue 52's targets read, what the NPU computes), else the fake-quant model (the runtime's numerics)."""
    if "kl_fp16_htp" in df and df["kl_fp16_htp"].notna().any():
        return "kl_fp16_htp", "through QNN HTP (simulated)"
    return "kl_fp16", "fake-quant model"


def _panel(ax, q: pd.DataFrame, xcol: str, xlabel: str, ttft_col: str | None, reasons: dict, title: str) -> None:
    """KL against FP16 (drawn_kl's) over `xcol` (size, or a cold TTFT with its min..max), every method drawn the
    same way (the paper's and the user's), with the Pareto front of all points; a method without that KL is named,
    not drawn with another's."""
    import matplotlib.pyplot as plt

    kl, source = drawn_kl(q)
    cmap, cloud, missing = plt.get_cmap("tab10"), [], []
    for j, method in enumerate(sorted(q["quantizer"].unique())):
        s = q[q["quantizer"] == method].sort_values("bits")
        if kl not in s or not s[kl].notna().any():
            missing.append(method)
            continue
        s = s[s[xcol].notna() & s[kl].notna()] if xcol in s else s.iloc[:0]
        if s.empty:
            continue
        xerr = [s[xcol] - s[f"{ttft_col}_min"], s[f"{ttft_col}_max"] - s[xcol]] if ttft_col else None
        yerr = s[f"{kl}_ci"].fillna(0) if f"{kl}_ci" in s else None
        ax.errorbar(s[xcol], s[kl], xerr=xerr, yerr=yerr, marker=MARKERS[j % len(MARKERS)], ms=5,
                    capsize=2, lw=1.2, color=cmap(j % 10), label=method)
        for x, y, b in zip(s[xcol], s[kl], s["bits"]):
            ax.annotate(f"{b:g}", (x, y), textcoords="offset points", xytext=(4, 3), fontsize=6, color=cmap(j % 10))
        cloud += list(zip(s[xcol], s[kl]))
    if missing:
        ax.text(0.98, 0.98, f"no KL {source}: " + ", ".join(missing), fontsize=7, ha="right", va="top",
                transform=ax.transAxes)
    front = pareto(cloud)
    if len(front) > 1:
        ax.step([p[0] for p in front], [p[1] for p in front], where="post", color="0.5", ls="--", lw=0.8,
                label="Pareto front", zorder=0)
    if not cloud and ttft_col:
        ax.text(0.5, 0.5, "no TTFT measured", ha="center", va="center", transform=ax.transAxes)
    if ttft_col and reasons:
        ax.text(0.02, 0.02, "not run: " + ", ".join(sorted(reasons)) + " †", fontsize=7, transform=ax.transAxes)
    ax.set_yscale("log")
    ax.set_xlabel(xlabel, fontsize=8)
    ax.set_ylabel(f"mean KL(FP16 || quantized), nats/token,\n{source} (lower is better; 95% CI)", fontsize=8)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title(title + "; labels = budget bits", fontsize=9)


def _draw(df: pd.DataFrame, model: str, name: str, figures_dir: Path, tags: str) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ttft_cols = _ttft_columns(df)
    axes_spec = [("effective_bits", "effective bits per weight (quantized linears)", None)]
    axes_spec += [(c, f"cold TTFT (s), {c.removeprefix('ttft ')}" + (" flash (emulated)" if "MB/s" in c else ""), c)
                  for c in ttft_cols]
    text = display(df[df["model"] == model], short=True)
    reasons = _ttft_unrun(df, ttft_cols)
    fig = plt.figure(figsize=(max(11, 4.2 * len(axes_spec)), 4.2 + 0.24 * (len(text) + 2)))
    grid = fig.add_gridspec(2, len(axes_spec), height_ratios=[4.2, 0.24 * (len(text) + 2)])
    for i, (xcol, xlabel, ttft_col) in enumerate(axes_spec):
        _panel(fig.add_subplot(grid[0, i]), df[df["quantizer"] != "fp16"], xcol, xlabel, ttft_col, reasons,
               "quality vs size" if i == 0 else "quality vs cold TTFT (min..max)")
    tab_ax = fig.add_subplot(grid[1, :])
    tab_ax.axis("off")
    if len(text):
        t = tab_ax.table(cellText=text.values, colLabels=list(text.columns), loc="upper center", cellLoc="center")
        t.auto_set_font_size(False)
        t.set_fontsize(6)
        t.auto_set_column_width(list(range(len(text.columns))))
    if reasons:
        tab_ax.text(0.0, 0.0, "† cold TTFT not run: " + "; ".join(f"{q}: {why}" for q, why in sorted(reasons.items())),
                    fontsize=7, transform=tab_ax.transAxes, va="top")
    fig.suptitle(f"Quantizers compared on {model}; {tags}", fontsize=9)
    fig.tight_layout()
    return output.save_figure(fig, name, figures_dir)


def render(rows: pd.DataFrame, paper: pd.DataFrame | None, figures_dir: Path) -> Section:
    if rows.empty or (rows["status"] == "ok").sum() == 0:
        return Section(NAME, TITLE, rules.NOT_RUN, "no rows yet",
                       "Not run yet: `make compare-quantizers` (QUANTIZERS=..., BITS=..., MODELS=..., FLASH_MBPS=...).\n")
    df = table(rows)
    figures, parts = [], []
    models = sorted(df["model"].unique())
    for model in models:
        per_model = rows[rows["model"] == model]
        tags = "; ".join(selection.labels(per_model))
        figures += _draw(df[df["model"] == model], model, NAME if len(models) == 1 else f"{NAME}-{model}",
                         figures_dir, tags)
        parts.append(f"**{model}** ({tags}):\n\n" + md_table(display(df[df["model"] == model])))
    body = "".join(f"![{TITLE}](figures/{p.name})\n\n" for p in figures if p.suffix == ".png")
    body += ("Not a paper artifact: a side-by-side of quantizers (the paper's and any registered one) on every axis. "
             "± is a 95% interval (KL and top-1: t-interval over windows of the corpus's held-out split, or of the "
             "text a column names); accuracy's [interval] is the "
             "95% Wilson interval over its items; TTFT "
             "is the median [min..max] over cold runs of the packed model in our runtime. Perplexity `local` and the "
             "`*-local` tasks are local proxies; `wikitext2` appears when the hub was reachable.\n\n")
    body += "\n".join(parts)
    methods = sorted(set(df["quantizer"]) - {"fp16"})
    summary = f"{len(methods)} quantizers ({', '.join(methods)}) on {', '.join(models)}"
    return Section(NAME, TITLE, rules.NO_CLAIM, summary, body, figures)


@register_artifact
class CompareQuantizers(SweepArtifact):
    NAME, TITLE, EXPERIMENTS = NAME, TITLE, EXPERIMENTS
    FILTERS = FILTERS
    sweep, render = staticmethod(sweep), staticmethod(render)
