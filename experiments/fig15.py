"""Figure 15 (section 5.5.1): end-to-end completion latency of one cold process, 512 prompt tokens and 512 generated,
broken into cold start (TTFT), graph switch and decode. EdgeFlow decodes on the CPU, as the paper sets it up.

Ours: `completion` rows (conf/experiment/completion.yaml: the ttft kind with experiment.extra.gen_tokens=512), one
per metric per repetition: `ttft_s` (wall clock, spawn -> first token), `graph_switch_s` and `decode_s` (the
engine's own clock: gen_tokens - 1 greedy decode steps). "Graph switch" is what the paper calls llm.npu's switch to
a CPU decode graph; EdgeFlow has none, so its value is the gap from the end of prefill to the first decode step;
llama.cpp and MNN decode with the graph and weights they prefilled with, so theirs is "not applicable" (a null row
with that reason). A bar is the medians stacked; the total's spread is min-max over repetitions of the sum.

The paper's (results/paper/fig15.csv): llm.npu+'s 2.9 s switch, EdgeFlow's decode speedup over llm.npu+ (1.13x on
Qwen1.5-1.8B, 1.00x on Mistral-7B), and the completion totals printed on the figure's bars.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from experiments import lineup, output, rules, selection
from experiments.base import SweepArtifact, register_artifact
from experiments.output import Section, fmt, md_table

NAME = "fig15"
TITLE = "Figure 15 - completion latency: cold start, graph switch and decode (512 in, 512 out)"
EXPERIMENTS = ("completion",)
EDGEFLOW_BITS = (5,)  # the paper's default bit-width
PAPER_MODELS = {"mistral-7b", "qwen1.5-1.8b"}
# (metric, column prefix, label)
PARTS = (("ttft_s", "cold", "cold start"), ("graph_switch_s", "switch", "graph switch"), ("decode_s", "decode", "decode"))
COLORS = {"cold start": "#4c72b0", "graph switch": "#dd8452", "decode": "#55a868"}
# EdgeFlow "enters decoding seamlessly": reproduced when its prefill-end -> first-decode-step gap is under this share
# of its completion latency.
SWITCH_SHARE = 0.01
PAPER_PEER = "llmnpu"  # the paper's series its decode speedup and graph switch are stated against (fig15.csv)


def sweep(models=("smollm2-135m",), systems: tuple[str, ...] | None = None, bits=EDGEFLOW_BITS, device="local",
          flash_mbps: float | None = None, prompt_tokens: int = 512, gen_tokens: int = 512,
          rounds: int = 3) -> list[list[str]]:
    """One point per round x model x system (every system by default, lineup.py; x bits for the proposed system,
    EdgeFlow): one cold process of `prompt_tokens` prompt tokens
    that generates `gen_tokens` tokens (the first included)."""
    if gen_tokens < 2:
        raise ValueError(f"fig15: gen_tokens must be >= 2 (a decode phase), got {gen_tokens}")
    return interleaved("completion", models, systems, bits, device, flash_mbps, rounds,
                       [f"experiment.extra.prompt_tokens={int(prompt_tokens)}",
                        f"experiment.extra.gen_tokens={int(gen_tokens)}"])


def interleaved(experiment: str, models, systems, bits, device, flash_mbps, rounds: int,
                extra: list[str]) -> list[list[str]]:
    """Points in `rounds` rounds, each running every system once (protocol.repetitions=1 unless overridden; the
    warm-up only in the first): on a shared host the load drifts over minutes, and interleaving lets every system
    meet it alike instead of one system's repetitions all landing in a busy spell. A round is its own configuration
    (experiment.notes), so a sweep resumes round by round."""
    systems = lineup.systems() if systems is None else tuple(systems)
    lineup.check(systems, experiment)
    if not 1 <= int(rounds) <= 100:
        raise ValueError(f"{experiment}: rounds must be within [1, 100], got {rounds}")
    points = []
    for r in range(int(rounds)):
        for model in models:
            for system in systems:
                for b in lineup.budgets(system, bits):
                    p = [f"experiment={experiment}", f"model={model}", f"system={system}", f"device={device}", *extra,
                         f"experiment.notes=round-{r + 1}-of-{rounds}", "protocol.repetitions=1"]
                    if r:
                        p.append("protocol.warmup_runs=0")
                    p += lineup.budget_overrides(system, b)
                    if flash_mbps:
                        p.append(f"device.flash_read_mbps={float(flash_mbps)}")
                    points.append(p)
    return points


# --- our rows -----------------------------------------------------------------------------------------------------------

def _own(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows with a `series` column; the proposed system's only of its own artifact (lineup.own_rows: other
    quantizers are other artifacts)."""
    if rows.empty:
        return rows.assign(series=pd.Series(dtype=str))
    rows = rows[lineup.own_rows(rows)].copy()
    bits = rows["bits"] if "bits" in rows.columns else pd.Series(index=rows.index, dtype=float)
    rows["series"] = [lineup.series_name(s, b) for s, b in zip(rows["system"], bits)]
    return rows


def breakdown(rows: pd.DataFrame) -> pd.DataFrame:
    """Per model and series: median [min, max] of each part, the total (sum per repetition) and why a part is
    absent. Columns: model, series, system, {cold,switch,decode}_{median,min,max,note}, total_{median,min,max}, n."""
    rows = _own(rows)
    out = []
    for (model, series), g in rows.groupby(["model", "series"]):
        ok = g[g["status"] == "ok"]
        if ok.empty:
            continue
        line = {"model": model, "series": series, "system": g["system"].iloc[0],
                "failed": int((g["status"] == "failed").sum())}  # attempts that crashed or hung (one row each)
        per_rep = {}
        for metric, part, _ in PARTS:
            m = ok[ok["metric"] == metric]
            vals = m["value"].dropna()
            line[f"{part}_median"] = vals.median() if len(vals) else None
            line[f"{part}_min"] = vals.min() if len(vals) else None
            line[f"{part}_max"] = vals.max() if len(vals) else None
            null = m[m["value"].isna()]
            line[f"{part}_note"] = _first_clause(null["notes"].iloc[0]) if len(null) and not len(vals) else ""
            for key, v in zip(zip(m["config_hash"], m["repetition"]), m["value"]):  # a round is a configuration
                per_rep.setdefault(key, 0.0)
                per_rep[key] += 0.0 if pd.isna(v) else v
        if line["cold_median"] is None or line["decode_median"] is None:
            continue  # a cold-start-only row (gen_tokens = 1) has no decode: not a completion
        totals = pd.Series(list(per_rep.values()), dtype=float)
        line.update(total_median=totals.median(), total_min=totals.min(), total_max=totals.max(), n=len(totals))
        out.append(line)
    return pd.DataFrame(out)


def _first_clause(notes) -> str:
    return str(notes or "").split("; ")[0]


def decode_speedups(bd: pd.DataFrame, unpaired: dict[str, str] | None = None) -> pd.DataFrame:
    """EdgeFlow's decode speedup over each other system measured on the same model: their decode_s / EdgeFlow's;
    none over the systems in `unpaired` (selection.unpaired_systems: they did other work)."""
    out = []
    ours = lineup.proposed()
    for model, g in bd.groupby("model"):
        for ef in g[g["system"] == ours].itertuples():
            for other in g[~g["system"].isin([ours, *(unpaired or {})])].itertuples():
                out.append({"model": model, "ours": ef.series, "versus": other.series, "system": other.system,
                            "speedup": other.decode_median / ef.decode_median})
    return pd.DataFrame(out, columns=["model", "ours", "versus", "system", "speedup"])


def unrun(rows: pd.DataFrame) -> pd.DataFrame:
    bad = selection.unrun_reasons(_own(rows))
    return bad.drop_duplicates(["model", "series", "reason"]) if not bad.empty else bad


# --- figure ---------------------------------------------------------------------------------------------------------------

def _bars(ax, bd: pd.DataFrame, bad: pd.DataFrame, title: str) -> None:
    names = list(bd["series"]) + list(dict.fromkeys(s for s in bad["series"] if s not in set(bd["series"])))
    for y, name in enumerate(names):
        hit = bd[bd["series"] == name]
        if hit.empty:
            reason = bad[bad["series"] == name]["reason"].iloc[0]
            ax.text(0, y, f"  {reason[:110]}", va="center", fontsize=7, color="#b22222")
            continue
        r = hit.iloc[0]
        left = 0.0
        for _, part, label in PARTS:
            width = r[f"{part}_median"]
            if width is None or pd.isna(width):
                continue
            ax.barh(y, width, left=left, color=COLORS[label], edgecolor="black", linewidth=0.4)
            left += width
        ax.errorbar(r["total_median"], y, xerr=[[r["total_median"] - r["total_min"]],
                                                [r["total_max"] - r["total_median"]]], color="black", capsize=3)
        switch = ("graph switch n/a" if pd.isna(r["switch_median"])
                  else f"graph switch {r['switch_median'] * 1e3:.2g} ms")
        runs = f"n={int(r['n'])}" + (f", {int(r['failed'])} failed attempts" if r["failed"] else "")
        ax.text(r["total_max"], y, f"  {r['total_median']:.2f} s ({switch}; {runs})", va="center", fontsize=7.5)
    ax.set_yticks(range(len(names)), names)
    ax.set_ylim(len(names) - 0.4, -0.6)  # first series on top, room for a not-run line at the bottom
    ax.set_xlabel("completion latency (s)")
    ax.set_title(title, fontsize=9)
    right = max([*bd["total_max"], 1e-3]) if len(bd) else 1.0
    ax.set_xlim(0, right * 1.6)


def _paper_panel(ax, paper: pd.DataFrame | None) -> None:
    if paper is None:
        ax.set_axis_off()
        return
    totals = paper[paper["metric"] == "completion_s"]
    labels, y = [], 0
    for model, g in totals.groupby("model", sort=False):
        for r in g.itertuples():
            switch = paper[(paper["model"].isna() | (paper["model"] == model)) & (paper["system"] == r.system)
                           & (paper["metric"] == "graph_switch_s")]
            ax.barh(y, r.value, color="white", edgecolor="gray", hatch="////")
            sw = float(switch["value"].iloc[0]) if len(switch) else 0.0
            extra = f", incl. {sw:g} s graph switch" if sw else ", no graph switch"
            ax.text(r.value, y, f"  {r.value:g} s{extra}", va="center", fontsize=7.5)
            labels.append(f"{model}\n{lineup.label(r.system)}")
            y += 1
        sp = paper[(paper["model"] == model) & (paper["metric"] == "decode_speedup")]
        if len(sp):
            ax.text(0.98, y - 1.5, f"EdgeFlow decode speedup over llm.npu+: {sp['value'].iloc[0]:.2f}x", ha="right", va="center",
                    fontsize=7.5, transform=ax.get_yaxis_transform())
    ax.set_yticks(range(len(labels)), labels, fontsize=7.5)
    ax.invert_yaxis()
    ax.set_xlim(0, max(totals["value"]) * 1.7)
    ax.set_xlabel("completion latency (s)")
    ax.set_title("paper (Xiaomi 15 Pro): totals on the figure's bars;\nits cold start / decode split was lost in "
                 "the text extraction", fontsize=9)


def draw(rows: pd.DataFrame, paper: pd.DataFrame | None, figures_dir: Path, name: str = NAME) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    bd, bad = breakdown(rows), unrun(rows)
    models = sorted(set(bd["model"]) | set(bad["model"])) if len(bd) or len(bad) else ["(no model)"]
    fig, axes = plt.subplots(len(models) + 1, 1, figsize=(11, 2.2 + 1.9 * (len(models) + 1)), squeeze=False)
    for ax, model in zip(axes[:, 0], models):
        tag = "; ".join(selection.labels(rows[rows["model"] == model]))
        _bars(ax, bd[bd["model"] == model] if len(bd) else bd, bad[bad["model"] == model] if len(bad) else bad,
              f"ours: {model} — {tag}")
    _paper_panel(axes[-1, 0], paper)
    handles = [Patch(facecolor=c, edgecolor="black", label=p) for p, c in COLORS.items()]
    handles.append(Patch(facecolor="white", edgecolor="gray", hatch="////", label="paper (total)"))
    fig.legend(handles=handles, loc="lower center", ncol=4, fontsize=8, frameon=False)
    fig.suptitle("Figure 15 (ours): completion of one cold process = cold start (wall clock) + graph switch + decode "
                 "(engine clock); medians, error bar min–max of the total; red: did not run", fontsize=9.5)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return output.save_figure(fig, name, figures_dir)


# --- report -----------------------------------------------------------------------------------------------------------------

def compare(bd: pd.DataFrame, paper: pd.DataFrame | None, cap_reasons: list[str] = (),
            unpaired: dict[str, str] | None = None) -> list[dict]:
    """Our statements beside the paper's: EdgeFlow has no graph switch; its decode speedup over llm.npu+ (not run
    when llm.npu+ did other work: `unpaired`). A verdict is capped at qualitative for the reasons given
    (rules.cap_reasons: another model, device, proxy data)."""
    lines, peer = [], lineup.playing(PAPER_PEER)
    for r in bd[bd["system"] == lineup.proposed()].itertuples() if len(bd) else []:
        sw, total = r.switch_median, r.total_median
        share = sw / total if sw is not None and not pd.isna(sw) and total else None
        verdict = rules.NOT_RUN if share is None else (rules.REPRODUCED if share < SWITCH_SHARE else rules.DIFFERS)
        verdict = rules.cap(verdict, cap_reasons)
        lines.append({"model": r.model, "statement": f"{r.series} enters decoding without a graph switch",
                      "ours": "–" if share is None else f"{sw * 1e3:.3g} ms ({share * 100:.2g}% of {total:.2f} s)",
                      "paper": "none (llm.npu+: 2.9 s)", "verdict": verdict, "_caps": list(cap_reasons)})
    if paper is None:
        return lines
    speed, unpaired = decode_speedups(bd, unpaired), unpaired or {}
    for p in paper[paper["metric"] == "decode_speedup"].itertuples():
        hit = speed[(speed["system"] == peer) & (speed["model"] == p.model)]
        ours = float(hit["speedup"].iloc[0]) if len(hit) else None
        lines.append({"model": p.model, "statement": "EdgeFlow's decode speedup over llm.npu+ (both on the CPU)",
                      "ours": unpaired.get(peer, "–") if ours is None else f"{ours:.2f}x",
                      "paper": f"{p.value:.2f}x",
                      "verdict": rules.ratio_verdict(ours, p.value, caps=cap_reasons) if ours is not None
                      else rules.NOT_RUN,
                      "_caps": list(cap_reasons) if ours is not None else [unpaired.get(peer, "llm.npu+ not run")]})
    return lines


def render(rows: pd.DataFrame, paper: pd.DataFrame | None, figures_dir: Path) -> Section:
    if rows.empty:
        return output.not_run_section(NAME, TITLE, "no rows in the store")
    rows, left_out = selection.one_condition(rows)
    bd, bad = breakdown(rows), unrun(rows)
    if bd.empty and bad.empty:
        return output.not_run_section(NAME, TITLE, "no completion measured (every row failed)")
    figures = draw(rows, paper, figures_dir)
    unpaired = selection.unpaired_systems(rows)
    lines = compare(bd, paper, rules.cap_reasons(rows[lineup.is_proposed(rows)], PAPER_MODELS), unpaired)
    verdict, count = rules.overall([line["verdict"] for line in lines])
    summary = count if verdict != rules.NOT_RUN else "no EdgeFlow completion and no llm.npu+ run to compare"
    tags = selection.labels(rows)
    note = selection.models_differ_note(set(bd["model"]) if len(bd) else set(), PAPER_MODELS)
    body = [f"![{TITLE}](figures/{figures[0].name})\n", "Labels: " + "; ".join(tags) + ".\n" if tags else "",
            f"{note}\n" if note else "", f"{left_out}\n" if left_out else "",
            "**Statements of section 5.5.1**, ours beside the paper's (EdgeFlow's switch: *reproduced* when under "
            f"{SWITCH_SHARE:.0%} of its completion latency; decode speedup: the ratio rule):\n",
            md_table(pd.DataFrame(lines)) if lines else "_(nothing to compare)_\n"]
    if len(bd):
        table = pd.DataFrame([{
            "model": r["model"], "system": r["series"],
            **{label: (f"{fmt(r[f'{part}_median'])} [{fmt(r[f'{part}_min'])}–{fmt(r[f'{part}_max'])}]"
                       if not pd.isna(r[f"{part}_median"]) else f"n/a: {r[f'{part}_note']}")
               for _, part, label in PARTS},
            "total": f"{fmt(r['total_median'])} [{fmt(r['total_min'])}–{fmt(r['total_max'])}]", "n": int(r["n"]),
            "failed attempts": int(r["failed"])}
            for _, r in bd.iterrows()])
        body += ["\n**Our completion breakdown** (s; median [min–max] over repetitions; cold start is wall clock from "
                 "spawn, switch and decode the engine's own clock):\n", md_table(table)]
        speed = decode_speedups(bd, unpaired)
        if len(speed):
            body += ["\n**EdgeFlow's decode speedup** over the systems measured here (their decode time / "
                     "EdgeFlow's; the paper's is over llm.npu+ only):\n",
                     md_table(speed.assign(speedup=[f"{v:.2f}x" for v in speed["speedup"]])
                              [["model", "ours", "versus", "speedup"]])]
    if len(bad):
        body += ["\n**Did not run:**\n", md_table(bad[["model", "series", "reason"]])]
    claims = rules.claims(NAME, lines, lambda line: f"{line['statement']} ({line['model']})")
    return Section(NAME, TITLE, verdict, summary, "\n".join(b for b in body if b), figures, claims=claims)


@register_artifact
class Fig15(SweepArtifact):
    NAME, TITLE, EXPERIMENTS = NAME, TITLE, EXPERIMENTS
    sweep, render = staticmethod(sweep), staticmethod(render)
