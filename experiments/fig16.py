"""Figure 16 (section 5.5.2): memory timeline, power and energy during one cold start of a 512-token prompt.

Ours: `coldstart` rows (conf/experiment/coldstart.yaml: the ttft kind at 512 fixed prompt tokens, first token only).
Memory: the protocol's RSS timeline (VmRSS polled from /proc every protocol.rss_sample_ms on a host; a phone's
on-device sampler adds PSS), kept in the notes of each `peak_rss_mb` / `peak_pss_mb` row; the drawn run is the
repetition with the median TTFT. Power and energy: `energy_j` and `avg_power_w` over spawn -> first token where the
device has a counter (a host: RAPL package energy through powercap; a phone: battery current x voltage); elsewhere
those rows are null with the reason, drawn as "not run" with it.
"Ideal" is the paper's definition: the model's weights at INT8 (one byte per parameter) plus the KV cache of the
prompt (FP16), computed from the converted checkpoint when it is in the cache.

The paper's (results/paper/fig16.csv): Mistral-7B's ideal 6.9 GB and llm.npu+'s ~8 GB; EdgeFlow / llm.npu+ average
power 1.176 and energy 0.871.
"""
from __future__ import annotations

import json
import struct
from pathlib import Path

import pandas as pd

from experiments import fig15, lineup, output, rules, selection
from experiments.base import SweepArtifact, register_artifact
from experiments.output import Section, fmt, md_table

NAME = "fig16"
TITLE = "Figure 16 - memory, power and energy during a 512-token cold start"
EXPERIMENTS = ("coldstart",)
PAPER_MODELS = {"mistral-7b"}
# The timelines: rows of their own (harness/systems/base.py Timeline: one row per sample, `at_s` its time; the store
# turns older rows' notes into such rows), of the metric a peak or a total summarizes.
TIMELINES = {"rss": "rss_mib", "pss": "pss_mib", "power": "power_w"}
PAPER_PEER = fig15.PAPER_PEER  # the paper's power and energy ratios are EdgeFlow's over llm.npu+'s (fig16.csv)


def sweep(models=("smollm2-135m",), systems: tuple[str, ...] | None = None, bits=fig15.EDGEFLOW_BITS, device="local",
          flash_mbps: float | None = None, prompt_tokens: int = 512, rounds: int = 3) -> list[list[str]]:
    """One point per round x model x system (every system by default; x bits for EdgeFlow): a cold start of one `prompt_tokens`-token prompt;
    rounds interleave the systems (fig15.interleaved)."""
    return fig15.interleaved("coldstart", models, systems, bits, device, flash_mbps, rounds,
                             [f"experiment.extra.prompt_tokens={int(prompt_tokens)}"])


# --- our rows -----------------------------------------------------------------------------------------------------------

def timeline_of(g: pd.DataFrame, kind: str) -> list[tuple[float, float]]:
    """The (seconds, value) series of one run's rows `g`; [] when there is none."""
    samples = g[(g["metric"] == TIMELINES[kind]) & g["at_s"].notna()].sort_values("at_s")
    return list(zip(samples["at_s"].astype(float), samples["value"].astype(float)))


def runs(rows: pd.DataFrame) -> pd.DataFrame:
    """One line per model, series and repetition: ttft, peak memory, energy and power (or the reason they are
    absent) and the timelines. The energy/power reason is the first clause of the null row's notes."""
    rows = fig15._own(rows)
    rows = rows[rows["status"] == "ok"]
    out = []
    for (model, series, _, rep), g in rows.groupby(["model", "series", "config_hash", "repetition"]):
        by = {m: r for m, r in zip(g["metric"], g.to_dict("records"))}
        if "ttft_s" not in by:
            continue
        line = {"model": model, "series": series, "system": g["system"].iloc[0], "repetition": rep,
                "ttft_s": by["ttft_s"]["value"]}
        for metric in ("peak_rss_mb", "peak_pss_mb", "energy_j", "avg_power_w"):
            r = by.get(metric)
            line[metric] = None if r is None or pd.isna(r["value"]) else r["value"]
            line[f"{metric}_why"] = "" if r is None or not pd.isna(r["value"]) else fig15._first_clause(r["notes"])
        for kind in TIMELINES:
            line[kind] = timeline_of(g, kind)
        line["sensor_label"] = (by.get("energy_j") or {}).get("label", "measured")
        out.append(line)
    return pd.DataFrame(out)


def median_run(r: pd.DataFrame) -> pd.DataFrame:
    """Per model and series, the repetition whose TTFT is the median (the lower middle for an even count)."""
    picks = []
    for _, g in r.groupby(["model", "series"]):
        g = g.sort_values("ttft_s")
        picks.append(g.iloc[(len(g) - 1) // 2])
    return pd.DataFrame(picks)


def summary(r: pd.DataFrame) -> pd.DataFrame:
    """Median [min, max] over repetitions of each metric per model and series, and why energy is absent."""
    out = []
    for (model, series), g in r.groupby(["model", "series"]):
        line = {"model": model, "series": series, "system": g["system"].iloc[0], "n": len(g)}
        for metric in ("ttft_s", "peak_rss_mb", "peak_pss_mb", "energy_j", "avg_power_w"):
            vals = g[metric].dropna()
            line[metric] = (vals.median(), vals.min(), vals.max()) if len(vals) else None
            why = [w for w in g.get(f"{metric}_why", pd.Series(dtype=str)) if w]
            line[f"{metric}_why"] = why[0] if why else ""
        out.append(line)
    return pd.DataFrame(out)


def ideal_mb(model: str, prompt_tokens: int) -> float | None:
    """The paper's ideal footprint for our model: parameters at one byte (INT8) + FP16 KV cache of the prompt, in
    MiB; None when the model's converted checkpoint is not in the cache (never converted just for a plot)."""
    from harness.cache import cache_dir

    folder = cache_dir("models") / model / "fp16"
    cfg_path, weights = folder / "config.json", folder / "model.safetensors"
    if not (cfg_path.is_file() and weights.is_file()):
        return None
    cfg = json.loads(cfg_path.read_text())
    with open(weights, "rb") as f:  # safetensors: u64 little-endian header length, then a JSON header of shapes
        header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
    params = 0
    for name, t in header.items():
        if name != "__metadata__":
            n = 1
            for d in t["shape"]:
                n *= d
            params += n
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    kv = 2 * cfg["num_hidden_layers"] * cfg["num_key_value_heads"] * head_dim * prompt_tokens * 2
    return (params + kv) / 2**20


# --- figure ---------------------------------------------------------------------------------------------------------------

def draw(rows: pd.DataFrame, paper: pd.DataFrame | None, figures_dir: Path, name: str = NAME) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    r = runs(rows)
    picked, summ = median_run(r), summary(r)
    bad = fig15.unrun(rows)
    models = sorted(set(r["model"]) | set(bad["model"] if len(bad) else []))
    fig, axes = plt.subplots(len(models) + 1, 2, figsize=(13, 3.6 * (len(models) + 1)), squeeze=False)
    for row, model in enumerate(models):
        ax_mem, ax_pow = axes[row]
        tag = "; ".join(selection.labels(rows[rows["model"] == model]))
        mine = picked[picked["model"] == model] if len(picked) else picked
        for p in mine.itertuples():
            color = lineup.color(p.system)  # the system's own (harness/systems/<name>.py)
            if p.rss:
                t, v = zip(*p.rss)
                ax_mem.plot(t, v, color=color, label=f"{p.series} RSS")
            if p.pss:
                t, v = zip(*p.pss)
                ax_mem.plot(t, v, color=color, linestyle="--", label=f"{p.series} PSS")
            ax_mem.axvline(p.ttft_s, color=color, linestyle=":", linewidth=1)
        prompt = rows.loc[rows["model"] == model, "prompt_tokens"].dropna()
        ideal = ideal_mb(model, int(prompt.iloc[0])) if len(prompt) else None
        if ideal:
            ax_mem.axhline(ideal, color="gray", linestyle="-.", label=f"ideal: INT8 model + KV cache ({ideal:.0f} MiB)")
        for j, b in enumerate(bad[bad["model"] == model].itertuples() if len(bad) else []):
            ax_mem.text(0.12, 0.03 + 0.07 * j, f"{b.series}: {b.reason[:70]}", transform=ax_mem.transAxes,
                        fontsize=6.5, color="#b22222", va="bottom")
        ax_mem.set_xlabel("time from spawn (s); dotted: first token")
        ax_mem.set_ylabel("memory (MiB)")
        ax_mem.set_title(f"(a) memory during the cold start, {model}\n{tag}", fontsize=8)
        if ax_mem.lines:
            ax_mem.legend(fontsize=7, loc="center right")
        _power_panel(ax_pow, summ[summ["model"] == model] if len(summ) else summ, model)
    _paper_panel(axes[-1][0], axes[-1][1], paper)
    fig.suptitle("Figure 16 (ours): resources during one cold start (the median-TTFT repetition's timeline; bars: "
                 "median, error bars min–max)", fontsize=9.5)
    fig.tight_layout()
    return output.save_figure(fig, name, figures_dir)


def _power_panel(ax, s: pd.DataFrame, model: str) -> None:
    """Energy (J) and average power (W) per system, or why they are not there."""
    names = list(s["series"]) if len(s) else []
    twin = ax.twinx()
    reasons = {line.energy_j_why or "no energy counter" for line in s.itertuples() if line.energy_j is None} \
        if len(s) else set()
    if len(reasons) == 1 and all(line.energy_j is None for line in s.itertuples()):
        ax.text(0.5, 0.5, "not run for any system:\n" + "\n".join(_wrap(reasons.pop(), 70)), transform=ax.transAxes,
                ha="center", va="center", fontsize=8, color="#b22222")
        reasons = set()
    for x, line in enumerate(s.itertuples() if len(s) else []):
        if line.energy_j is None:
            if reasons:
                ax.text(x, 0.5, "not run:\n" + "\n".join(_wrap(line.energy_j_why or "no energy counter", 24)),
                        transform=ax.get_xaxis_transform(), ha="center", va="center", fontsize=6.5, color="#b22222")
            continue
        med, lo, hi = line.energy_j
        ax.bar(x - 0.18, med, 0.36, yerr=[[med - lo], [hi - med]], color="#4c72b0", capsize=3)
        if line.avg_power_w is not None:
            pm, pl, ph = line.avg_power_w
            twin.bar(x + 0.18, pm, 0.36, yerr=[[pm - pl], [ph - pm]], color="#dd8452", capsize=3)
    ax.set_xticks(range(len(names)), names, fontsize=8)
    ax.set_xlim(-0.6, max(len(names), 1) - 0.4)
    ax.set_ylabel("energy over the cold start (J, blue)")
    twin.set_ylabel("average power (W, orange)")
    ax.set_title(f"(b) energy and average power over the cold start, {model}", fontsize=8)


def _wrap(text: str, width: int) -> list[str]:
    import textwrap

    return textwrap.wrap(text, width)[:6]


def _paper_panel(ax_mem, ax_pow, paper: pd.DataFrame | None) -> None:
    if paper is None:
        ax_mem.set_axis_off()
        ax_pow.set_axis_off()
        return
    mem = paper[paper["metric"] == "memory_gb"]
    labels = ["ideal (INT8 model\n+ KV cache)" if s == "ideal" else f"{lineup.label(s)} (stable)"
              if s == PAPER_PEER else lineup.label(s) for s in mem["system"]]
    ax_mem.bar(range(len(mem)), mem["value"], color="white", edgecolor="gray", hatch="////")
    for x, v in enumerate(mem["value"]):
        ax_mem.text(x, v, f"{v:g} GB", ha="center", va="bottom", fontsize=8)
    ax_mem.set_xticks(range(len(mem)), labels, fontsize=8)
    ax_mem.set_ylabel("memory (GB)")
    ax_mem.set_title("paper's values, Mistral-7B: EdgeFlow 'close to ideal'\n(its memory timeline was lost in the "
                     "text extraction)", fontsize=8)
    rat = paper[paper["metric"].isin(["avg_power_ratio", "energy_ratio"])]
    ax_pow.bar(range(len(rat)), rat["value"], color="white", edgecolor="gray", hatch="////")
    ax_pow.axhline(1.0, color="black", linewidth=0.8)
    for x, v in enumerate(rat["value"]):
        ax_pow.text(x, v, f"{v:.3f}x", ha="center", va="bottom", fontsize=8)
    ax_pow.set_xticks(range(len(rat)), ["average power" if m == "avg_power_ratio" else "energy"
                                        for m in rat["metric"]], fontsize=8)
    ax_pow.set_ylabel("EdgeFlow / llm.npu+")
    ax_pow.set_ylim(0, 1.4)
    ax_pow.set_title("paper's values, Mistral-7B: EdgeFlow relative to llm.npu+", fontsize=8)


# --- report -----------------------------------------------------------------------------------------------------------------

def compare(summ: pd.DataFrame, rows: pd.DataFrame, paper: pd.DataFrame | None) -> list[dict]:
    lines, ours, peer = [], lineup.proposed(), lineup.playing(PAPER_PEER)
    for s in summ[summ["system"] == ours].itertuples() if len(summ) else []:
        prompt = rows.loc[rows["model"] == s.model, "prompt_tokens"].dropna()
        ideal = ideal_mb(s.model, int(prompt.iloc[0])) if len(prompt) else None
        peak = s.peak_pss_mb or s.peak_rss_mb
        kind = "PSS" if s.peak_pss_mb else "RSS"
        ok = ideal is not None and peak is not None
        caps = rules.cap_reasons(rows[(rows["model"] == s.model) & (rows["system"] == ours)], PAPER_MODELS)
        lines.append({"model": s.model, "statement": f"{s.series}'s peak {kind} close to the ideal (ratio rule)",
                      "ours": f"{peak[0]:.0f} MiB / {ideal:.0f} MiB = {peak[0] / ideal:.2f}" if ok else "–",
                      "paper": "close to 6.9 GB (Mistral-7B)",
                      "verdict": rules.ratio_verdict(peak[0] / ideal, 1.0, caps=caps) if ok else rules.NOT_RUN,
                      "_caps": caps if ok else ["no footprint or prompt length in the store"]})
    if paper is None:
        return lines
    unpaired = selection.unpaired_systems(rows)
    for metric, col, what in (("avg_power_ratio", "avg_power_w", "average power"), ("energy_ratio", "energy_j",
                                                                                     "energy")):
        p = paper[paper["metric"] == metric]
        if p.empty:
            continue
        value = float(p["value"].iloc[0])
        if peer in unpaired:  # its demo's power over its own prompt is no peer of EdgeFlow's over ours
            lines.append({"model": "–", "statement": f"EdgeFlow / llm.npu+ {what}", "ours": unpaired[peer],
                          "paper": f"{value:.3f}x", "verdict": rules.NOT_RUN, "_caps": [unpaired[peer]]})
            continue
        ours = None
        for model, g in summ.groupby("model") if len(summ) else []:
            ef, npu = g[g["system"] == ours], g[g["system"] == peer]
            if len(ef) and len(npu) and ef[col].iloc[0] is not None and npu[col].iloc[0] is not None:
                ours = ef[col].iloc[0][0] / npu[col].iloc[0][0]
                caps = rules.cap_reasons(rows[rows["model"] == model], PAPER_MODELS)
                lines.append({"model": model, "statement": f"EdgeFlow / llm.npu+ {what}", "ours": f"{ours:.3f}x",
                              "paper": f"{value:.3f}x", "verdict": rules.ratio_verdict(ours, value, caps=caps),
                              "_caps": caps})
        if ours is None:
            lines.append({"model": "–", "statement": f"EdgeFlow / llm.npu+ {what}", "ours": "–",
                          "paper": f"{value:.3f}x", "verdict": rules.NOT_RUN,
                          "_caps": ["llm.npu+ runs only on a phone with its binary; no pair measured"]})
    return lines


def _cell(v, digits=3) -> str:
    return "–" if v is None else f"{fmt(v[0], digits)} [{fmt(v[1], digits)}–{fmt(v[2], digits)}]"


def render(rows: pd.DataFrame, paper: pd.DataFrame | None, figures_dir: Path) -> Section:
    if rows.empty:
        return output.not_run_section(NAME, TITLE, "no rows in the store")
    # power from a host's RAPL, a phone's battery and the loopback's scripted files are three conditions
    rows = rows.assign(sensor=selection.sensor_source(rows))
    rows, left_out = selection.one_condition(rows, (*selection.TIMED, "sensor"))
    r = runs(rows)
    bad = fig15.unrun(rows)
    if r.empty and bad.empty:
        return output.not_run_section(NAME, TITLE, "no cold start measured (every row failed)")
    figures = draw(rows, paper, figures_dir)
    summ = summary(r) if len(r) else pd.DataFrame(columns=["model", "series", "system"])
    lines = compare(summ, rows, paper)
    verdict, count = rules.overall([line["verdict"] for line in lines])
    summary_line = count if verdict != rules.NOT_RUN else "no EdgeFlow footprint and no llm.npu+ run to compare"
    tags = selection.labels(rows)
    note = selection.models_differ_note(set(summ["model"]), PAPER_MODELS)
    body = [f"![{TITLE}](figures/{figures[0].name})\n", "Labels: " + "; ".join(tags) + ".\n" if tags else "",
            f"{note}\n" if note else "", f"{left_out}\n" if left_out else "",
            "**Statements of section 5.5.2**, ours beside the paper's (ratio rule; the footprint's reference is 1.0 "
            "= the ideal):\n", md_table(pd.DataFrame(lines)) if lines else "_(nothing to compare)_\n"]
    if len(summ):
        table = pd.DataFrame([{
            "model": s["model"], "system": s["series"], "TTFT (s)": _cell(s["ttft_s"]),
            "peak RSS (MiB)": _cell(s["peak_rss_mb"], 4),
            "peak PSS (MiB)": _cell(s["peak_pss_mb"], 4) if s["peak_pss_mb"] else f"not run: {s['peak_pss_mb_why']}",
            "energy (J)": _cell(s["energy_j"]) if s["energy_j"] else f"not run: {s['energy_j_why']}",
            "avg power (W)": _cell(s["avg_power_w"]) if s["avg_power_w"] else "not run (as energy)",
            "n": s["n"]} for _, s in summ.iterrows()])
        body += ["\n**Our cold starts** (median [min–max] over repetitions):\n", md_table(table)]
    if len(bad):
        body += ["\n**Did not run:**\n", md_table(bad[["model", "series", "reason"]])]
    claims = rules.claims(NAME, lines, lambda line: f"{line['statement']} ({line['model']})")
    return Section(NAME, TITLE, verdict, summary_line, "\n".join(b for b in body if b), figures, claims=claims)


@register_artifact
class Fig16(SweepArtifact):
    NAME, TITLE, EXPERIMENTS = NAME, TITLE, EXPERIMENTS
    sweep, render = staticmethod(sweep), staticmethod(render)
