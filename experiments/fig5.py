"""Figure 5 (section 3.2): llm.npu's CPU/NPU pipeline leaves its lanes idle - the bubble rate reaches 91% and varies
with the prompt's length, because the NPU runs non-matmul operators 2.1x slower than the CPU.

Ours: EdgeFlow's engine under the `llmnpu-static` policy (llm.npu's coarse split: attention on the CPU, the rest on
the accelerator, two chunks in flight) at 256, 512 and 1024 prompt tokens, measured on this host (`pipeline` rows,
the same experiment as Figure 14: per-lane bubble rates and per-operator times from the engine's trace) and simulated
at phone-like NPU/CPU ratios (experiment=pipeline_sim, labelled simulated; one ratio the paper's, one assumed:
harness/pipeline_sim.py SIM_INPUTS, printed beside the verdicts). The 2.1x itself is an NPU measurement:
with no NPU here it is an input of the simulation, not a result.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from experiments import fig14, output, rules, selection
from experiments.base import SweepArtifact, register_artifact
from experiments.output import Section, fmt, md_table

NAME = "fig5"
TITLE = "Figure 5 - llm.npu-style pipeline: bubble rates by prompt length, operator times per lane"
EXPERIMENTS = ("pipeline",)
PROMPT_TOKENS = (256, 512, 1024)
POLICY = "llmnpu-static"
CHUNK = fig14.DEFAULT_CHUNK  # the runtime's; Figure 14's runs at other chunk sizes are not pooled in
PAPER_MODELS = {"llama3-8b"}
FILTERS = {"model": "models"}
BUBBLES = {"measured": ("edgeflow_cpu_bubble_rate", "edgeflow_accel_bubble_rate"),
           "simulated": ("sim_cpu_bubble_rate", "sim_accel_bubble_rate")}


def sweep(models=("smollm2-135m",), bits: float = 5, device="local", prompt_tokens=PROMPT_TOKENS,
          rounds: int = 3) -> list[list[str]]:
    """Figure 14's points for the llmnpu-static policy at each prompt length (shared configurations are measured
    once), and one simulation per length."""
    points = []
    for n in prompt_tokens:
        pts = fig14.sweep(models, bits, device, None, int(n), rounds, chunks=(CHUNK,))
        points += [p for p in pts if f"pipeline={POLICY}" in p or p[0] == "experiment=pipeline_sim"]
    return points


def bubbles(rows: pd.DataFrame) -> pd.DataFrame:
    """Median bubble rate per model, series, prompt length and lane, of the llmnpu-static policy."""
    ok = rows[(rows["status"] == "ok") & (rows["pipeline"] == POLICY)].dropna(subset=["value"])
    out = []
    for series, (cpu, accel) in BUBBLES.items():
        for lane, metric in (("cpu", cpu), ("accelerator", accel)):
            m = ok[ok["metric"] == metric]
            for (model, n), g in m.groupby(["model", "prompt_tokens"]):
                out.append({"model": model, "series": series, "prompt_tokens": int(n), "lane": lane,
                            "bubble_rate": g["value"].median(), "n": len(g)})
    return pd.DataFrame(out, columns=["model", "series", "prompt_tokens", "lane", "bubble_rate", "n"])


def operator_times(rows: pd.DataFrame) -> pd.DataFrame:
    """Median seconds per operator (the engine's trace, summed over layers and chunks) per model and prompt length."""
    ok = rows[(rows["status"] == "ok") & (rows["pipeline"] == POLICY) & rows["metric"].str.startswith("edgeflow_op_")]
    med = ok.groupby(["model", "prompt_tokens", "metric"])["value"].median().reset_index()
    return med.assign(operator=med["metric"].str.removeprefix("edgeflow_op_").str.removesuffix("_s"),
                      prompt_tokens=med["prompt_tokens"].astype(int))


def draw(b: pd.DataFrame, ops: pd.DataFrame, said: dict, figures_dir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = sorted(b["model"].unique())
    fig, axes = plt.subplots(len(models), 2, figsize=(12, 3.8 * len(models)), squeeze=False)
    for (ax_b, ax_o), model in zip(axes, models):
        for (series, lane), g in b[b["model"] == model].groupby(["series", "lane"]):
            g = g.sort_values("prompt_tokens")
            ax_b.plot(g["prompt_tokens"], g["bubble_rate"], "-o" if lane == "cpu" else "--s",
                      color="#4c72b0" if series == "measured" else "#dd8452", label=f"{series}: {lane} lane")
        if "bubble_rate_max" in said:
            peak = float(said["bubble_rate_max"])
            ax_b.axhline(peak, color="gray", linestyle=":", linewidth=1)
            ax_b.text(ax_b.get_xlim()[0], peak, f" paper: up to {peak:.0%}", fontsize=7, va="bottom", color="gray")
        ax_b.set_ylim(0, 1)
        ax_b.set_xlabel("prompt tokens")
        ax_b.set_ylabel("bubble rate (idle / span)")
        ax_b.set_title(f"{model}: llmnpu-static bubble rates (measured: host; simulated: phone-like ratios)",
                       fontsize=9)
        ax_b.legend(fontsize=7)
        o = ops[ops["model"] == model]
        if len(o):
            n = int(o["prompt_tokens"].min())
            o = o[o["prompt_tokens"] == n].sort_values("value")
            ax_o.barh(o["operator"], o["value"], color="#4c72b0")
            ax_o.set_xlabel("seconds (engine trace, all layers and chunks), measured on this host")
            ax_o.set_title(f"{model}: operator times at {n} tokens", fontsize=9)
    fig.suptitle("Figure 5 (ours): llm.npu's coarse CPU/accelerator split in our engine", fontsize=9.5)
    fig.tight_layout()
    return output.save_figure(fig, NAME, figures_dir)


def render(rows: pd.DataFrame, paper: pd.DataFrame | None, figures_dir: Path) -> Section:
    if len(rows):
        rows = fig14.with_chunk(rows)
        rows = rows[rows["chunk"] == CHUNK]
    rows, left_out = selection.one_condition(rows)
    b = bubbles(rows) if len(rows) else pd.DataFrame()
    if b.empty:
        return output.not_run_section(NAME, TITLE, "no llmnpu-static pipeline rows in the store")
    ops = operator_times(rows)
    said = dict(zip(paper["metric"], paper["value"])) if paper is not None else {}
    figures = draw(b, ops, said, figures_dir)
    lines, caps_seen = [], {}
    for (model, series), g in b.groupby(["model", "series"]):
        peak = g.loc[g["bubble_rate"].idxmax()]
        simulated = rows["metric"].fillna("").str.startswith("sim_")
        mine = rows[(rows["model"] == model) & (simulated == (series == "simulated"))]
        caps = rules.cap_reasons(mine, PAPER_MODELS) + ["a median, no interval"]
        caps_seen[f"{model}, {series}"] = caps
        lines.append({"model": model, "series": series, "statement": "highest bubble rate over prompt lengths",
                      "ours": f"{peak['bubble_rate']:.0%} ({peak['lane']}, {peak['prompt_tokens']} tokens)",
                      "paper": f"{said['bubble_rate_max']:.0%}" if "bubble_rate_max" in said else "–",
                      "verdict": rules.share_verdict(float(peak["bubble_rate"]), float(said["bubble_rate_max"]),
                                                      caps=caps) if "bubble_rate_max" in said else rules.NOT_RUN,
                      "_caps": caps})
    lines.append({"model": "–", "series": "–", "statement": "non-matmul operators on the NPU vs the CPU",
                  "ours": "no NPU here (an input of the simulation)", "paper": f"{said.get('npu_slowdown_non_matmul', '–')}x",
                  "verdict": rules.NOT_RUN, "_caps": ["no NPU here: it is measured on a phone's NPU"]})
    verdict, count = rules.overall([line["verdict"] for line in lines])
    wide = b.assign(cell=[f"{v:.0%} (n={n})" for v, n in zip(b["bubble_rate"], b["n"])]).pivot_table(
        index=["model", "series", "lane"], columns="prompt_tokens", values="cell", aggfunc="first").reset_index()
    tags = selection.labels(rows[rows["pipeline"] == POLICY])
    body = [f"![{TITLE}](figures/{figures[0].name})\n", "Labels: " + "; ".join(tags) + ".\n" if tags else "",
            selection.models_differ_note(set(b["model"]), PAPER_MODELS), left_out, output.caps_note(caps_seen),
            "**The paper's statements**, ours beside them (a rate is judged on the additive scale of shares; medians, "
            "no interval):\n", md_table(pd.DataFrame(lines)),
            "The simulated bubble rate follows from the simulation's inputs, of which the paper gives one and the "
            "other is assumed (below): agreement with the paper's rate would be partly circular, so it stays "
            "*qualitative*.\n" if (b["series"] == "simulated").any() else "",
            output.simulation_inputs() if (b["series"] == "simulated").any() else "",
            "\n**Bubble rates** of llmnpu-static by prompt length (median):\n", md_table(wide)]
    if len(ops):
        table = ops.pivot_table(index=["model", "operator"], columns="prompt_tokens", values="value").map(
            fmt).reset_index()
        body += ["\n**Operator times** (s, engine trace, all layers and chunks; median):\n", md_table(table)]
    claims = rules.claims(NAME, lines, lambda line: f"{line['statement']} ({line['model']}, {line['series']})")
    return Section(NAME, TITLE, verdict, count, "\n".join(b for b in body if b), figures, claims=claims)


@register_artifact
class Fig5(SweepArtifact):
    NAME, TITLE, EXPERIMENTS, FILTERS = NAME, TITLE, EXPERIMENTS, FILTERS
    sweep, render = staticmethod(sweep), staticmethod(render)
