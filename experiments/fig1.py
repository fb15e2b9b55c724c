"""Figure 1 (section 3.1): where a cold start's time goes, per system, for a 128-token prompt.

The paper's (llm.npu on Llama3-8B): online graph construction 51.2 s, materialised graphs 10.5 s, and overlapped
per-layer graphs 9.1 s of which 7.4 s are a pipeline bubble waiting for weights: loading, not compute, is the
bottleneck. Ours: the cold (nothing preloaded) `preload` rows of Figure 2's sweep, i.e. the same 128-token cold
starts, for llama.cpp, MNN and EdgeFlow, each split by the engine's own clock (secondary columns of the TTFT rows):

- EdgeFlow (edgeflow-run's trace): setup, exposed load (I/O with no compute running), exposed weight preparation
  (unpack with neither compute nor I/O running: a layer is unpacked once read, so while both run the reads set the
  pace), prefill (any compute running), bubble (nothing running); process start is the
  wall-clock TTFT minus the engine's own.
- llama.cpp (its perf lines): prefill is its prompt eval; its perf clock starts after the model is loaded (the
  "load time" it prints runs from there to the end of the first evaluation, i.e. tokenizing plus the prompt eval), so
  load is the wall-clock TTFT before that clock: process start, model loading and context setup, which its logs do
  not separate; setup is its clock's time outside the prompt eval. It maps the file, so page faults during prompt
  eval count as prefill.
- MNN (our driver's timers): Python start-up + `import MNN` (setup), load, prefill; the rest is process start.

Beside it, the paper's first question asked of QNN itself (experiment=npu_compile, harness/npu/): how long QNN's
compiler takes to turn the accelerator half into an HTP graph online (the whole model as one graph, llm.npu's way,
and layer by layer) against loading the materialized context binaries, and how many bytes QNN embeds beside the
weights' bytes. QNN's x86 compiler on this host, for the default model and a paper-shaped one: host timings.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from experiments import fig15, fig2, lineup, output, rules, selection
from experiments.base import SweepArtifact, register_artifact
from experiments.output import Section, fmt, md_table
from harness.runner.settings import SPLITS
from harness.systems.base import TTFT_PHASES

NAME = "fig1"
TITLE = "Figure 1 - cold-start breakdown per system (128-token prompt)"
EXPERIMENTS = (*fig2.EXPERIMENTS, "npu_compile")
DEFAULT_MODELS = ("smollm2-135m",)
PAPER_SHAPED = "shape-qwen1.5-1.8b"  # QNN's graph preparation at a paper model's size (random weights)
PAPER_MODELS = fig2.PAPER_MODELS
PARTS = TTFT_PHASES
COLORS = dict(zip(PARTS, ("#bbbbbb", "#8172b3", "#dd8452", "#937860", "#4c72b0", "#c44e52")))
NOT_PREFILL = ("process start", "setup", "load", "weight preparation", "bubble")


def sweep(models: tuple[str, ...] | None = None, systems: tuple[str, ...] | None = None, bits=fig2.EDGEFLOW_BITS, device="local",
          flash_mbps: float | None = None, prompt_tokens: int = 128, rounds: int = 3,
          npu_models: tuple[str, ...] | None = None) -> list[list[str]]:
    """Figure 2's sweep without preloading (the same configurations: measured once, drawn by both), and QNN's graph
    preparation of EdgeFlow's accelerator half at 5 bits (npu_compile, the default SoC) for `npu_models`: by default
    the sweep's models, and when no models are given the default model and the paper-shaped PAPER_SHAPED."""
    if npu_models is None:
        npu_models = (*DEFAULT_MODELS, PAPER_SHAPED) if models is None else tuple(models)
    models = DEFAULT_MODELS if models is None else models
    graphs = [["experiment=npu_compile", f"model={m}", "quantizer=edgeflow", "quantizer.budget_bits=5.0",
               f"experiment.extra.split={split}"] for m in npu_models for split in SPLITS]
    return fig2.sweep(models, systems, bits, device, flash_mbps, prompt_tokens, (0.0,), rounds) + graphs


def split(system: str, m: dict) -> dict | None:
    """The parts (seconds) of one cold start from its metrics (the system's own TTFT_PHASES mapping), or None when
    the engine's timings are missing."""
    cls = lineup.system_class(system)
    parts = cls.ttft_phases(m) if cls is not None and "ttft_s" in m else None
    if parts is None:
        return None
    return {p: max(0.0, parts.get(p, 0.0)) for p in PARTS}  # a clock mismatch of a few ms never goes negative


def breakdown(rows: pd.DataFrame) -> pd.DataFrame:
    """Median of each part and of the wall-clock TTFT per condition, model and series over cold repetitions."""
    rows = selection.with_conditions(fig15._own(selection.current(rows)))
    rows = rows[rows["status"] == "ok"]
    keys = ["model", "device", "flash", "series", "system"]
    reps = []
    for key, g in rows.groupby([*keys, "config_hash", "repetition"]):
        m = dict(zip(g["metric"], g["value"]))
        if m.get("resident_before", 1.0) > 0.01 or "ttft_s" not in m:
            continue  # preloaded (Figure 2's other steps), or no TTFT
        parts = split(key[4], m)
        if parts is not None:
            reps.append({**dict(zip(keys, key[:5])), "ttft_s": m["ttft_s"], **parts})
    if not reps:
        return pd.DataFrame(columns=[*keys, "ttft_s", *PARTS, "n"])
    r = pd.DataFrame(reps)
    out = r.groupby(keys)[["ttft_s", *PARTS]].median().reset_index()
    return out.merge(r.groupby(keys).size().rename("n").reset_index(), on=keys)


# --- figure ---------------------------------------------------------------------------------------------------------------

def _stacked(ax, names: list[str], parts: list[dict], title: str, xlabel: str) -> None:
    for y, p in enumerate(parts):
        left = 0.0
        for part in PARTS:
            if p.get(part):
                ax.barh(y, p[part], left=left, color=COLORS[part], edgecolor="black", linewidth=0.4)
                left += p[part]
        ax.text(left, y, f"  {left:.3g} s" + (f" (n={p['n']})" if "n" in p else ""), va="center", fontsize=7.5)
    ax.set_yticks(range(len(names)), names, fontsize=8)
    ax.set_ylim(len(names) - 0.4, -0.6)
    ax.set_xlim(0, max([sum(p.get(k, 0) for k in PARTS) for p in parts] + [1e-3]) * 1.35)
    ax.set_xlabel(xlabel)
    ax.set_title(title, fontsize=8)


def draw(bd: pd.DataFrame, paper: pd.DataFrame | None, figures_dir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    groups = list(bd.groupby(["model", "device", "flash"]))
    fig, axes = plt.subplots(len(groups) + 1, 1, figsize=(9, 2.2 + 1.6 * (len(groups) + 1)), squeeze=False)
    for ax, ((model, device, flash), g) in zip(axes[:, 0], groups):
        _stacked(ax, list(g["series"]), g.to_dict("records"),
                 selection.condition_text(model=model, device=device, flash=flash) + " · medians over cold runs",
                 "seconds from spawn to the first token")
    ax = axes[-1, 0]
    if paper is None:
        ax.set_axis_off()
    else:
        bars = [{part: v for part, v in zip(g["part"], g["value"])} for _, g in paper.groupby("approach", sort=False)]
        _stacked(ax, list(dict.fromkeys(paper["approach"])), bars,
                 "paper's values: llm.npu on Llama3-8B, 128 tokens (Snapdragon 8 Elite)", "seconds")
    fig.legend(handles=[Patch(color=COLORS[p], label=p) for p in PARTS], loc="upper center", ncol=6, fontsize=7.5)
    fig.tight_layout(rect=(0, 0, 1, 0.94))
    return output.save_figure(fig, NAME, figures_dir)


# --- report -----------------------------------------------------------------------------------------------------------------

def compare(bd: pd.DataFrame, rows: pd.DataFrame, paper: pd.DataFrame | None) -> list[dict]:
    """Per condition and baseline: the share of the cold start that is not prefill, beside the paper's bubble share of
    llm.npu's overlapped cold start (7.4 of 9.1 s). EdgeFlow's own split is in the table, not compared: the paper's
    Figure 1 is about the baselines."""
    share = None
    if paper is not None:
        over = paper[paper["approach"] == "overlapping"].set_index("part")["value"]
        share = float(over.get("bubble", float("nan")) / over.sum())
    lines = []
    for r in bd[bd["system"] != lineup.proposed()].to_dict("records"):
        ours = sum(r[p] for p in NOT_PREFILL) / r["ttft_s"]
        caps = rules.cap_reasons(rows[(rows["model"] == r["model"]) & (rows["system"] == r["system"])],
                                  PAPER_MODELS)
        lines.append({"condition": selection.condition_text(model=r["model"], device=r["device"], flash=r["flash"]),
                      "statement": f"{r['series']}: share of the cold start outside prefill",
                      "ours": f"{ours:.0%}", "paper": f"{share:.0%} (llm.npu, overlapped: bubble)" if share else "–",
                      "verdict": rules.share_verdict(ours, share, caps=caps) if share else rules.NOT_RUN,
                      "_caps": caps})
    return lines


def graph_preparation(rows: pd.DataFrame) -> pd.DataFrame:
    """One line per model, SoC and split from npu_compile rows: QNN's online compile and the context load, whole model
    as one graph (EdgeFlow's split only: llm.npu's CPU half sits between its graphs) and summed layer by layer, and
    the context binary's bytes beside the weights'."""
    rows = rows[(rows.get("experiment", pd.Series(dtype=str)) == "npu_compile") & (rows["status"] == "ok")]
    lines = []
    for (model, soc, split), g in rows.groupby(["model", "soc", "npu_split"]):
        v = g[g["layer"].isna()].groupby(["variant", "metric"])["value"].last()  # the whole model's rows
        one, per = "one graph", "all layers"
        if (per, "qnn_compile_s") not in v:
            continue
        whole = one if (one, "qnn_compile_s") in v else per  # bytes are the same either way
        lines.append({"model": model, "SoC": soc, "split per layer": SPLITS[split],
                      "online compile, one graph s": fmt(v.get((one, "qnn_compile_s"))),
                      "context load, one graph s": fmt(v.get((one, "qnn_load_s"))),
                      "online compile, per layer (sum) s": fmt(v[(per, "qnn_compile_s")]),
                      "context load, per layer (sum) s": fmt(v[(per, "qnn_load_s")]),
                      "context MB": fmt(v[(whole, "qnn_context_mb")]),
                      "weights MB": fmt(v[(whole, "qnn_weights_mb")])})
    return pd.DataFrame(lines)


def _paper_graph_times(paper: pd.DataFrame | None) -> str:
    """'The paper's llm.npu on Llama3-8B: graph preparation 45 s online (compose graph 4 s + ...) against ...' from
    its CSV ('' without it)."""
    if paper is None:
        return ""
    v = paper.set_index(["approach", "part"])
    try:
        online, note = v.loc[("online construction", "weight preparation"), ["value", "notes"]]
        load, prepare = (v.loc[("materialization", part), "value"] for part in ("load", "weight preparation"))
    except KeyError:
        return ""
    return (f"The paper's llm.npu on Llama3-8B: graph preparation {online:g} s online ({note}) against loading the "
            f"graph {load:g} s + preparing it {prepare:g} s materialized. ")


def render(rows: pd.DataFrame, paper: pd.DataFrame | None, figures_dir: Path) -> Section:
    if rows.empty:
        return output.not_run_section(NAME, TITLE, "no rows in the store")
    bd = breakdown(rows)
    if bd.empty:
        return output.not_run_section(NAME, TITLE, "no cold start with the engine's own timings in the store")
    figures = draw(bd, paper, figures_dir)
    lines = compare(bd, rows, paper)
    verdict, count = rules.overall([line["verdict"] for line in lines])
    table = bd.assign(**{p: bd[p].map(lambda v: fmt(v)) for p in ["ttft_s", *PARTS]})
    bad = fig15.unrun(rows)
    tags = selection.labels(rows)
    body = [f"![{TITLE}](figures/{figures[0].name})\n", "Labels: " + "; ".join(tags) + ".\n" if tags else "",
            selection.spans_note(rows), selection.models_differ_note(set(bd["model"]), PAPER_MODELS),
            "**Share of the cold start outside prefill**, ours beside the paper's (the rule for shares, in "
            "percentage points; medians, no interval, so at best qualitative; llama.cpp's loading hides in its "
            "prefill through page faults):\n",
            md_table(pd.DataFrame(lines)), "\n**Breakdown** (seconds, medians over cold repetitions):\n",
            md_table(table)]
    if len(bad):
        body += ["\n**Did not run:**\n", md_table(bad[["model", "series", "reason"]])]
    graphs = graph_preparation(rows)
    if len(graphs):
        body += ["\n**QNN graph preparation** of EdgeFlow's accelerator half and of llm.npu's coarse split of the "
                 "same 5-bit linears (QNN's x86 HTP compiler and "
                 "context loader on this host, not a phone; output scales bounded, timing only). "
                 f"{_paper_graph_times(paper)}QNN stores every weight as INT8 whatever its bit-width, so its context "
                 "binary holds the weights' INT8 bytes again:\n", md_table(graphs)]
    claims = rules.claims(NAME, lines, lambda line: f"{line['statement']} ({line['condition']})")
    return Section(NAME, TITLE, verdict, count, "\n".join(b for b in body if b), figures, claims=claims)


@register_artifact
class Fig1(SweepArtifact):
    NAME, TITLE, EXPERIMENTS = NAME, TITLE, EXPERIMENTS
    sweep, render = staticmethod(sweep), staticmethod(render)
