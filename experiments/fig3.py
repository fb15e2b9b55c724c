"""Figure 3 (section 3.2, challenge 1): matmuls on importance-aware quantized weights (AWQ, CMPQ) must dequantize them
into INT8 on every call, and they lose the static weight optimisation of INT8; measured on this host's CPU kernels
by `make bench-dequant` (harness/bench/dequant.py). The paper measures a phone NPU, so the comparison is of ratios
and capped at qualitative:
  AWQ / INT8 and CMPQ / INT8   ours: dequantize + our best INT8 kernel, over that kernel on static INT8 codes
                               (the paper's: the NPU's dequantize + INT8 operator, over the INT8 operator)
  INT8 / Opt INT8              ours: the portable INT8 kernel over the ISA-specific one; the paper's: the INT8
                               operator over the one QNN optimised statically (another mechanism, the same question:
                               what the static, uniform INT8 path gains)
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from experiments import output, rules, selection
from experiments.base import BenchmarkArtifact, register_artifact
from experiments.output import Section, fmt, md_table

NAME = "fig3"
TITLE = "Figure 3 - matmul on dequantized-on-the-fly weights (AWQ, CMPQ) vs INT8 and optimised INT8"
EXPERIMENT = "bench-dequant"
EXPERIMENTS = ()
VARIANTS = {"opt_int8": "Opt INT8 (best kernel)", "int8": "INT8 (portable kernel)", "awq": "AWQ (dequant + best)",
            "cmpq": "CMPQ (dequant + best)"}
# (numerator, denominator) of each of the paper's ratios, in our variants (module docstring)
OURS = {("awq", "int8"): ("awq", "opt_int8"), ("cmpq", "int8"): ("cmpq", "opt_int8"),
        ("int8", "opt_int8"): ("int8", "opt_int8")}
CAPS = ["measured on a CPU, not the paper's phone NPU", "random weights of Llama3-8B's shapes"]


def measure(store=None) -> None:
    from harness.bench.dequant import run
    from harness.runner.store import ResultsStore

    store = store or ResultsStore()
    if not store.read(EXPERIMENT).empty:
        print(f"[experiments] {EXPERIMENT} already measured in {store.root}; delete its folder to measure again")
        return
    run(store)


def load_rows(store) -> pd.DataFrame:
    rows = selection.current(store.read(EXPERIMENT))
    if rows.empty:
        return rows
    shape = [json.loads(w) if isinstance(w, str) and w.startswith("{") else {} for w in rows["workload"]]
    return rows.assign(shape=[f"{s.get('C')}x{s.get('K')}" for s in shape],
                       kernel=[s.get("kernel", "?") for s in shape])


def ratios(rows: pd.DataFrame) -> pd.DataFrame:
    """Per shape and paper ratio: ours (latest run's medians)."""
    t = rows[(rows["metric"] == "matmul_s") & (rows["status"] == "ok")]
    wide = t.pivot_table(index="shape", columns="variant", values="value", aggfunc="median")
    out = []
    for (var, versus), (num, den) in OURS.items():
        for shape in wide.index:
            if num in wide.columns and den in wide.columns:
                out.append({"variant": var, "versus": versus, "shape": shape,
                            "ratio": float(wide.loc[shape, num] / wide.loc[shape, den])})
    return pd.DataFrame(out, columns=["variant", "versus", "shape", "ratio"])


def draw(rows: pd.DataFrame, figures_dir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = rows[rows["status"] == "ok"]
    shapes = sorted(set(t["shape"]))
    fig, axes = plt.subplots(1, len(shapes), figsize=(5.2 * len(shapes), 3.8), squeeze=False)
    for ax, shape in zip(axes[0], shapes):
        g = t[t["shape"] == shape]
        total = g[g["metric"] == "matmul_s"].groupby("variant")["value"].median()
        dq = g[g["metric"] == "dequant_s"].groupby("variant")["value"].median()
        names = [v for v in VARIANTS if v in total.index]
        x = np.arange(len(names))
        ms = [1e3 * total[v] for v in names]
        dqs = [1e3 * min(dq.get(v, 0.0), total[v]) for v in names]
        matmul = [m - d for m, d in zip(ms, dqs)]
        ax.bar(x, matmul, color="#4c72b0", label="INT8 matmul")
        ax.bar(x, dqs, bottom=matmul, color="#dd8452", label="dequantize into INT8")
        for xi, m in zip(x, ms):
            ax.text(xi, m, f"{m:.0f}", ha="center", va="bottom", fontsize=8)
        ax.set_xticks(x, [VARIANTS[v] for v in names], fontsize=7, rotation=12)
        ax.set_ylabel("ms per call (median)")
        ax.set_title(f"{shape} weights, {int(g['prompt_tokens'].iloc[0])} tokens, 1 thread "
                     f"({g['kernel'].iloc[0]})", fontsize=9)
        ax.legend(fontsize=7)
    fig.suptitle("Figure 3 (ours): matmul per weight format on this host's CPU kernels", fontsize=9.5)
    fig.tight_layout()
    return output.save_figure(fig, NAME, figures_dir)


def render(rows: pd.DataFrame, paper: pd.DataFrame | None, figures_dir: Path) -> Section:
    if rows.empty or not (rows["status"] == "ok").any():
        return output.not_run_section(NAME, TITLE, "no bench-dequant rows in the store")
    figures = draw(rows, figures_dir)
    ours = ratios(rows)
    lines, verdicts = [], []
    for p in (paper.itertuples() if paper is not None else []):
        mine = ours[(ours["variant"] == p.variant) & (ours["versus"] == p.versus)]
        for m in mine.itertuples():
            # one run per shape, no interval: a single measurement, capped (rules.ratio_verdict)
            v = rules.ratio_verdict(m.ratio, p.value, caps=CAPS)
            verdicts.append(v)
            lines.append({"ratio": f"{p.variant.upper()} / {p.versus.replace('_', ' ').upper()}", "shape": m.shape,
                          "ours": f"{m.ratio:.2f}x", "paper": f"{p.value:.2f}x", "verdict": v,
                          "before the cap": rules.ratio_verdict(m.ratio, p.value), "_caps": CAPS})
        if mine.empty:
            verdicts.append(rules.NOT_RUN)
            lines.append({"ratio": f"{p.variant.upper()} / {p.versus.replace('_', ' ').upper()}", "shape": "–",
                          "ours": "not run: no such variant in the store", "paper": f"{p.value:.2f}x",
                          "verdict": rules.NOT_RUN, "before the cap": rules.NOT_RUN,
                          "_caps": ["no such variant in the store"]})
    verdict, count = rules.overall(verdicts)
    t = rows[(rows["status"] == "ok")]
    table = t.pivot_table(index=["shape", "variant"], columns="metric", values="value", aggfunc="median").reset_index()
    table = table.assign(**{c: (1e3 * table[c]).map(fmt) for c in ("matmul_s", "dequant_s") if c in table})
    table = table.rename(columns={"matmul_s": "matmul (ms)", "dequant_s": "of which dequantize (ms)"})
    load = t["load_avg_1m"]
    body = [f"![{TITLE}](figures/{figures[0].name})\n",
            f"Measured: one thread, median of the calls; CPU {json.loads(t['device_info'].iloc[0]).get('cpu', '?')}, "
            f"best INT8 kernel {t['kernel'].iloc[0]}, load average up to {fmt(float(load.max()))} "
            f"(commit {t['git_commit'].iloc[0]}).\n",
            "Agreement can only be *qualitative*: " + "; ".join(CAPS) + ". The INT8 / Opt INT8 ratio compares a "
            "portable kernel with an ISA-specific one here, not QNN's static layout optimisation.\n",
            md_table(pd.DataFrame(lines)) if lines else "_(no paper values loaded)_\n",
            "\n**Our times** per shape and format:\n", md_table(table)]
    claims = rules.claims(NAME, lines, lambda line: f"dequantizing matmul {line['ratio']} ({line['shape']})")
    return Section(NAME, TITLE, verdict, count, "\n".join(body), figures, claims=claims)


@register_artifact
class Fig3(BenchmarkArtifact):
    NAME, TITLE, EXPERIMENTS = NAME, TITLE, EXPERIMENTS
    measure, load_rows, render = staticmethod(measure), staticmethod(load_rows), staticmethod(render)
