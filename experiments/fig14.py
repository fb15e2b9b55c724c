"""Figure 14 (section 5.4.3): the pipeline ablation at 512 prompt tokens - llm.npu's static split, then operator
placement, position-guided priority and task stealing - as latency and per-lane bubble rates.

Two series, never pooled:
- measured: EdgeFlow's cold TTFT on this host under each policy (`pipeline` rows, conf/experiment/pipeline.yaml: the
  ttft kind, rounds interleaving the policies), with the engine's own CPU/accelerator bubble rates and stolen tasks.
  The host's "accelerator" lane is CPU cores (DESIGN.md), so the lanes are equally fast: the paper's effects, which
  come from a slow-at-non-matmul NPU, need not show.
- simulated: each policy replayed by harness/pipeline_sim.py over the operator costs of warm prefills measured on
  this host, the accelerator at phone-like ratios (experiment=pipeline_sim; labelled simulated; pipeline_sim
  SIM_INPUTS: one ratio the paper's Figure 5b, one assumed): one
  decoder layer, as the paper's Figure 14 times it ("simulated, one layer"), and the whole prefill ("simulated").
Each series at several chunk sizes (rows' `variant`, "chunk 32"), never pooled: stealing needs more ready accelerator
tasks than its threshold (5), and each chunk has at most one ready (its operators are a chain), so at 512 tokens the
runtime's default 128-token chunks (4 of them) can never steal; 32-token chunks make 16 (the paper's Figure 9 draws
10). Each step's change against the previous policy is compared with the paper's (results/paper/fig14.csv); single
medians and a simulation carry no interval, so verdicts are capped at qualitative.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from experiments import output, rules, selection
from experiments.base import SweepArtifact, register_artifact
from experiments.output import Section, fmt, md_table
from harness.engine.run import POLICIES
from harness.systems.edgeflow import PipelineConfig

NAME = "fig14"
TITLE = "Figure 14 - pipeline ablation: placement, priority and stealing (512 tokens)"
EXPERIMENTS = ("pipeline",)
PAPER_MODELS = {"llama3-8b", "phi3-3.8b"}
PROMPT_TOKENS = 512  # the paper's; Figure 5's runs of the same experiments at other lengths are not pooled in
CHUNKS = (32, 64, 128)  # prompt tokens per prefill chunk (pipeline.chunk); 128 is the runtime's default
DEFAULT_CHUNK = PipelineConfig.chunk  # the runtime's; what rows stored before `variant` recorded the chunk size ran
PANEL = ["model", "chunk"]  # one comparison per model and chunk size
FILTERS = {"model": "models"}
SERIES = ("measured", "simulated, one layer", "simulated")  # host cold TTFT; sim_layer_*; sim_* (whole prefill)
# metric of ours for each paper metric, per series
METRICS = {"latency": ("ttft_s", "sim_layer_latency_s", "sim_latency_s"),
           "cpu_bubble": ("edgeflow_cpu_bubble_rate", "sim_layer_cpu_bubble_rate", "sim_cpu_bubble_rate"),
           "accel_bubble": ("edgeflow_accel_bubble_rate", "sim_layer_accel_bubble_rate", "sim_accel_bubble_rate"),
           "accel_busy": ("edgeflow_accel_busy_s", None, None),
           "stolen": ("edgeflow_cpu_stolen_tasks", "sim_layer_stolen_tasks", "sim_stolen_tasks")}


def _missing(what: str, metric: str | None) -> str:
    """Why a series has no number for a step: what ran does not report it, or its rows lack it."""
    if metric is None:
        name = what.replace("_", " ")
        return f"{rules.NOT_MEASURED} the pipeline simulator (it reports latency, bubble rates and steals, not {name})"
    return "no such number in this series"


def sweep(models=("smollm2-135m",), bits: float = 5, device="local", flash_mbps: float | None = None,
          prompt_tokens: int = PROMPT_TOKENS, rounds: int = 3, chunks=CHUNKS) -> list[list[str]]:
    """Per model and chunk size: `rounds` rounds of one cold run under each policy (interleaved), and one simulation
    point."""
    points = []
    ef = ["system=edgeflow", "quantizer=edgeflow", f"quantizer.budget_bits={float(bits)}", "packing=weightlet"]
    for model in models:
        for chunk in chunks:
            for r in range(int(rounds)):
                for policy in POLICIES:
                    p = ["experiment=pipeline", f"model={model}", *ef, f"pipeline={policy}",
                         f"pipeline.chunk={int(chunk)}", f"device={device}",
                         f"experiment.extra.prompt_tokens={int(prompt_tokens)}",
                         f"experiment.notes=round-{r + 1}-of-{rounds}", "protocol.repetitions=1",
                         *([] if r == 0 else ["protocol.warmup_runs=0"])]
                    points.append(p + ([f"device.flash_read_mbps={float(flash_mbps)}"] if flash_mbps else []))
            points.append(["experiment=pipeline_sim", f"model={model}", *ef, f"pipeline={POLICIES[-1]}",
                           f"pipeline.chunk={int(chunk)}", f"experiment.extra.prompt_tokens={int(prompt_tokens)}"])
    return points


def with_chunk(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows with their chunk size as a `chunk` column (from `variant`, "chunk 32"). Rows from before the chunk
    size was recorded: measured ones ran the runtime's default; simulated ones are left out (they replayed the cold
    prefill's costs, another basis than today's warm ones)."""
    variant = rows["variant"] if "variant" in rows else pd.Series(index=rows.index, dtype=object)
    chunk = variant.astype(str).str.extract(r"^chunk (\d+)$")[0].astype(float)
    keep = chunk.notna() | ~rows["metric"].astype(str).str.startswith("sim_")
    return rows[keep].assign(chunk=chunk[keep].fillna(DEFAULT_CHUNK).astype(int))


def _n_chunks(chunk: int) -> int:
    return -(-PROMPT_TOKENS // int(chunk))


def _series(metric: str) -> str:
    return SERIES[1] if metric.startswith("sim_layer_") else SERIES[2] if metric.startswith("sim_") else SERIES[0]


def medians(rows: pd.DataFrame) -> pd.DataFrame:
    """Median of every metric per model, chunk size, series (measured / simulated) and policy."""
    ok = with_chunk(rows[(rows["status"] == "ok") & rows["pipeline"].isin(POLICIES)].dropna(subset=["value"]))
    ok = ok.assign(series=ok["metric"].map(_series))
    return ok.groupby(PANEL + ["series", "pipeline", "metric"])["value"].agg(["median", "count"]).reset_index()


def _panels(med: pd.DataFrame) -> list[tuple[str, int]]:
    return sorted(set(zip(med["model"], med["chunk"])))


def _value(med: pd.DataFrame, panel, series, policy, metric) -> float | None:
    model, chunk = panel
    hit = med[(med["model"] == model) & (med["chunk"] == chunk) & (med["series"] == series)
              & (med["pipeline"] == policy) & (med["metric"] == metric)]
    return float(hit["median"].iloc[0]) if len(hit) else None


def compare(med: pd.DataFrame, rows: pd.DataFrame, paper: pd.DataFrame | None,
            caps_seen: dict | None = None) -> list[dict]:
    """Each of the paper's step changes beside ours, measured and simulated; `caps_seen` collects why each series'
    verdicts are capped ({model, series: reasons})."""
    lines = []
    steps = paper[paper["versus"].notna()] if paper is not None else pd.DataFrame()
    simulated = rows["metric"].fillna("").str.startswith("sim_") if len(rows) else pd.Series(dtype=bool)
    for panel in _panels(med):
        model, chunk = panel
        for p in steps.itertuples():
            what = p.metric.removesuffix("_change_pct")
            for i, series in enumerate(SERIES):
                metric = METRICS[what][i]
                new, old = (_value(med, panel, series, pol, metric) if metric else None for pol in (p.policy, p.versus))
                ours = None if new is None or not old else 100 * (new / old - 1)
                caps = rules.cap_reasons(rows[(rows["model"] == model) & (simulated == (i > 0))],
                                          PAPER_MODELS) + ["a median, no interval"]
                if caps_seen is not None and ours is not None:
                    caps_seen[f"{model}, {series}"] = caps
                verdict = rules.NOT_RUN if ours is None else rules.ratio_verdict(
                    1 + ours / 100, 1 + p.value / 100, caps=caps)
                lines.append({"model": model, "chunk": chunk, "series": series, "step": f"{p.versus} -> {p.policy}",
                              "change of": what.replace("_", " "), "ours %": "–" if ours is None else f"{ours:+.1f}",
                              "paper %": f"{p.value:+g}", "verdict": verdict,
                              "_caps": caps if ours is not None else [_missing(what, metric)]})
    return lines


def paper_latency(paper: pd.DataFrame | None) -> list[float] | None:
    """The paper's latency per policy relative to llmnpu-static's: its step changes chained (each is relative to
    the previous step)."""
    if paper is None:
        return None
    steps = paper[paper["metric"] == "latency_change_pct"].set_index("policy")["value"]
    out = [1.0]
    for policy in POLICIES[1:]:
        if policy not in steps:
            return None
        out.append(out[-1] * (1 + float(steps[policy]) / 100))
    return out


def _paper_says(paper: pd.DataFrame | None, what: str) -> str:
    """' (paper: -4.2%, -5.2%, -11.3% per step)' for the latency panel, ' (paper: NPU -82.2% with place+priority,
    ...)' for the bubble one, from the paper's CSV ('' without it)."""
    if paper is None:
        return ""
    steps = paper[paper["versus"].notna()]
    if what == "latency":
        values = steps.loc[steps["metric"] == "latency_change_pct", "value"]
        return f" (paper: {', '.join(f'{v:+g}%' for v in values)} per step)" if len(values) else ""
    lanes = {"accel_bubble_change_pct": "NPU", "cpu_bubble_change_pct": "CPU"}
    said = [f"{lanes[m]} {v:+g}% with {pol}" for m, v, pol in zip(steps["metric"], steps["value"], steps["policy"])
            if m in lanes and v < 0]  # the reductions the policies were built for
    return f" (paper: {', '.join(said)})" if said else ""


def draw(med: pd.DataFrame, paper: pd.DataFrame | None, figures_dir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    panels = _panels(med)
    theirs = paper_latency(paper)
    fig, axes = plt.subplots(len(panels), 2, figsize=(12, 3.6 * len(panels) + 0.6), squeeze=False)
    x = np.arange(len(POLICIES))
    colors, hatches = ("#4c72b0", "#dd8452", "#c9a26b"), ("", "//", "..")
    what = ("host, cold TTFT", "phone-like ratios, one layer", "phone-like ratios, whole prefill")
    for (ax_l, ax_b), panel in zip(axes, panels):
        title = f"{panel[0]}, {panel[1]}-token chunks ({_n_chunks(panel[1])} chunks)"
        for k, series in enumerate(SERIES):
            lat = [_value(med, panel, series, p, METRICS["latency"][k]) for p in POLICIES]
            base = lat[0] or next((v for v in lat if v), None)
            if base:
                ax_l.bar(x + (k - 1) * 0.27, [(v or np.nan) / base for v in lat], 0.26,
                         label=f"{series} ({what[k]})", color=colors[k], hatch=hatches[k])
            for lane, style in (("cpu_bubble", "-o"), ("accel_bubble", "--s")):
                ys = [_value(med, panel, series, p, METRICS[lane][k]) for p in POLICIES]
                ax_b.plot(x, [np.nan if v is None else v for v in ys], style, color=colors[k],
                          label=f"{series}: {lane.replace('_', ' ')}")
        if theirs:
            ax_l.plot(x, theirs, "k_", markersize=28, markeredgewidth=2, label="paper (Llama3-8B, Phi3-3.8B; phone)")
        ax_l.axhline(1, color="black", linewidth=0.6)
        ax_l.set_xticks(x, POLICIES, fontsize=8)
        ax_l.set_ylabel("latency / llmnpu-static's")
        ax_l.set_title(f"{title}\nlatency per policy{_paper_says(paper, 'latency')}", fontsize=8.5)
        if panel == panels[0]:  # the same series in every row
            ax_l.legend(fontsize=6.5, loc="lower left")
        ax_b.set_xticks(x, POLICIES, fontsize=8)
        ax_b.set_ylim(0, 1)
        ax_b.set_ylabel("bubble rate (idle / span)")
        ax_b.set_title(f"{title}\nbubble rates{_paper_says(paper, 'bubble')}", fontsize=8.5)
        if panel == panels[0]:
            ax_b.legend(fontsize=6.5, loc="upper right")
    fig.suptitle(f"Figure 14 (ours): pipeline policies at {PROMPT_TOKENS} tokens; measured on this host and simulated "
                 "at phone-like NPU/CPU ratios (one the paper's, one assumed)", fontsize=9.5)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.5 / (3.6 * len(panels) + 0.6)))
    return output.save_figure(fig, NAME, figures_dir)


def _no_steal_notes(med: pd.DataFrame, rows: pd.DataFrame) -> str:
    """Per model and chunk size where stealing never fired, why: each prompt chunk's operators form one chain, so at
    most one task per chunk is ready at a time and the accelerator queue never holds more tasks than there are
    chunks."""
    stolen = med[med["metric"].isin(METRICS["stolen"]) & (med["pipeline"] == POLICIES[-1])]
    steal = rows.loc[rows["metric"] == "edgeflow_steal_threshold", "value"]
    threshold = int(steal.max()) if len(steal) else PipelineConfig.steal_threshold
    notes = []
    for (model, chunk), g in stolen.groupby(PANEL):
        if g["median"].max() > 0:
            continue
        n_chunks = _n_chunks(chunk)
        why = (f"the accelerator queue never held more than the threshold ({threshold})" if n_chunks > threshold else
               f"{PROMPT_TOKENS} tokens in {chunk}-token chunks make {n_chunks}, at most one ready accelerator task "
               f"each (a chunk's operators are a chain), never more than the threshold ({threshold}); stealing needs "
               f"more than {threshold * chunk} prompt tokens at this chunk size")
        notes.append(f"- {model}, {chunk}-token chunks: stealing never triggered (0 stolen tasks, measured and "
                     f"simulated), so the last step changes nothing: {why}.\n")
    return "".join(notes)


def render(rows: pd.DataFrame, paper: pd.DataFrame | None, figures_dir: Path) -> Section:
    rows = rows[rows["prompt_tokens"] == PROMPT_TOKENS] if len(rows) else rows
    rows, left_out = selection.one_condition(rows)
    med = medians(rows) if len(rows) else pd.DataFrame()
    if med.empty:
        return output.not_run_section(NAME, TITLE, f"no pipeline rows at {PROMPT_TOKENS} prompt tokens in the store "
                                      "(Figure 14 compares at the paper's length; other lengths are Figure 5's)")
    figures = draw(med, paper, figures_dir)
    caps_seen: dict[str, list[str]] = {}
    lines = compare(med, rows, paper, caps_seen)
    verdict, count = rules.overall([line["verdict"] for line in lines])
    shown = ["ttft_s", "edgeflow_ttft_s", *(m for pair in METRICS.values() for m in pair if m)]
    table = med[med["metric"].isin(shown)]
    wide = table.assign(cell=[f"{fmt(m)} (n={n})" for m, n in zip(table["median"], table["count"])]).pivot_table(
        index=[*PANEL, "series", "metric"], columns="pipeline", values="cell", aggfunc="first")
    wide = wide[[p for p in POLICIES if p in wide.columns]].reset_index()
    steal_note = _no_steal_notes(med, rows)
    tags = selection.labels(rows)
    body = [f"![{TITLE}](figures/{figures[0].name})\n", "Labels: " + "; ".join(tags) + ".\n" if tags else "",
            selection.models_differ_note(set(med["model"]), PAPER_MODELS), left_out, steal_note,
            output.caps_note(caps_seen),
            "**Each step's change**, ours beside the paper's (ratio rule on 1 + change; medians, no interval):\n",
            md_table(pd.DataFrame(lines)) if lines else "_(no paper values loaded)_\n",
            output.simulation_inputs() if (med["series"] != SERIES[0]).any() else "",
            "\n**Our medians** per policy (wall-clock TTFT, the engine's own TTFT, bubble rates, busy time, stolen "
            "tasks; the simulation's in sim_layer_* for one layer, sim_* for the whole prefill):\n", md_table(wide)]
    bad = selection.unrun_reasons(rows)
    if len(bad):
        body += ["\n**Did not run:**\n", md_table(bad[["model", "pipeline", "reason"]].drop_duplicates())]
    claims = rules.claims(NAME, lines, lambda line: f"change of {line['change of']}, {line['step']} ({line['model']},"
                           f" {line['chunk']}-token chunks, {line['series']})", paper="paper %", ours="ours %")
    return Section(NAME, TITLE, verdict, count, "\n".join(b for b in body if b), figures, claims=claims)


@register_artifact
class Fig14(SweepArtifact):
    NAME, TITLE, EXPERIMENTS, FILTERS = NAME, TITLE, EXPERIMENTS, FILTERS
    sweep, render = staticmethod(sweep), staticmethod(render)
