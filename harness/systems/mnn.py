"""MNN baseline: our FP16 checkpoint exported by llmexport with INT8 (or INT4) weights, run cold through `MNN.llm`
in a fresh Python process (harness/systems/mnn_driver.py). TTFT is wall clock from spawn to the driver's
`first_token` line, so it includes the interpreter's start and `import MNN` (~0.1 s here; `mnn_import_s` shows it):
the PyPI wheel is MNN's only engine reachable here (its native llm_demo is not shipped).
Workload (harness/measure/workload.py): the prompt goes in as text (the workload's ids decoded by the model's
tokenizer, as llama.cpp and EdgeFlow get it), tokenized inside the clock by MNN's own tokenizer; the ids it used are
checked against the workload's (`tokens_match`). work.threads is `thread_num`; MNN.llm has no
context-size setting (its KV cache grows with the tokens it holds), so work.ctx is recorded, not passed; the wheel
does not report the ISA its kernels use."""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from harness.measure.cold import EngineError, repeat, run_once
from harness.measure.workload import prompt_file, prompt_text
from harness.models.zoo import checkpoint_dir
from harness.systems.base import (Measurement, Metric, NotRun, Prepared, System, SystemConfig, cold_metrics,
                                  decode_metrics, register_system)
from harness.systems.mnn_export import ExportTooLarge, export

DRIVER = Path(__file__).with_name("mnn_driver.py")


@dataclass
class MNNConfig(SystemConfig):
    """conf/system/mnn.yaml."""

    mnn_quant_block: int = 0  # 0 = per-output-channel weight scales; 32/64/128 = blockwise

    def __post_init__(self):
        super().__post_init__()
        if self.mnn_quant_block < 0:
            raise ValueError(f"system.mnn_quant_block must be >= 0 (0 = per-channel), got {self.mnn_quant_block}")


@register_system
class MNNSystem(System):
    name = "mnn"
    display, color = "MNN", "#e377c2"
    stand_in, paper_series = "int8", "mnn"
    startup_metric = "mnn_import_s"  # Python's start and `import MNN`: our driver's, not MNN's on a phone

    @classmethod
    def ttft_phases(cls, m: dict[str, float]) -> dict[str, float] | None:
        if "mnn_load_s" not in m:
            return None
        # setup: import MNN and the tokenizer (EdgeFlow's setup holds its tokenizer too; llama.cpp's load does)
        setup, load, prefill = m["mnn_import_s"] + m.get("mnn_tokenize_s", 0.0), m["mnn_load_s"], m["mnn_prefill_s"]
        return {"process start": m["ttft_s"] - setup - load - prefill, "setup": setup, "load": load,
                "prefill": prefill}
    config_type = MNNConfig
    decodes = True

    def prepare(self, model, bits, device) -> Prepared:
        if device.name != "local":
            raise NotRun(f"MNN runs here through the x86-64 `mnn` wheel only; on {device.name} it needs MNN's native "
                         "llm_demo built for the device, which no registry ships")
        try:
            folder = export(checkpoint_dir(model), model.name, bits=bits, quant_block=self.cfg.mnn_quant_block)
        except ExportTooLarge as e:
            raise NotRun(str(e)) from None
        files = sorted(str(f) for f in folder.iterdir() if f.is_file() and not f.name.startswith("."))
        return Prepared(self.name, files,
                        {"config": str(folder / "config.json"), "checkpoint": str(checkpoint_dir(model))},
                        f"mnn int{bits} weights, quant_block {self.cfg.mnn_quant_block} (0 = per channel)")

    def open_scorer(self, prepared: Prepared, ctx: int):
        from harness.systems.mnn_scorer import MNNScorer

        return MNNScorer.open(prepared.artifacts["config"], threads=int(self.cfg.threads))  # no context setting

    def run_cold(self, prepared, work, device, protocol) -> Measurement:
        self.check_workload(work)
        prompt_ids = list(work.token_ids)
        # A file named by the ids' digest, kept: the printed command line can be run again as it is.
        text_file = prompt_file(work, ".prompt.txt", prompt_text(work, prepared.artifacts["checkpoint"]))
        cmd = [sys.executable, "-I", str(DRIVER), prepared.artifacts["config"], str(work.threads), str(text_file),
               str(work.new_tokens)]
        runs = repeat(lambda p: run_once(device, cmd, prepared.files, first_token_line, self.cfg.timeout_s, p),
                      protocol)
        reps = [cold_metrics(r, device) + engine_metrics(r.stdout, r.stderr, prompt_ids, work.new_tokens)
                for r in runs]
        notes = [f"weights: {prepared.weight_format}", "ttft_s includes Python start and `import MNN` (mnn_import_s)"]
        if any(m.name == "tokens_match" and not m.value for rep in reps for m in rep):
            notes.append("NOT the same tokens: MNN's tokenizer gives the prompt text other ids than the workload's")
        return Measurement(self.name, reps, notes,
                           workload=work, command=cmd,
                           engine={"isa": "not reported by the MNN wheel", "threads": work.threads,
                                   "all_threads": f"{work.threads} (MNN's thread_num; its other threads not reported)",
                                   "ctx": "no setting: the KV cache grows with the tokens held"})


def first_token_line(stdout: bytes) -> bool:
    i = stdout.find(b"first_token ")
    return i >= 0 and b"\n" in stdout[i:]


def engine_metrics(stdout: bytes, stderr: bytes, prompt_ids: list[int], gen_tokens: int = 1) -> list[Metric]:
    """The driver's in-process timings, MNN's own load time and whether MNN's tokenizer gave the workload's ids."""
    try:
        line = next(ln for ln in stdout.decode().splitlines() if ln.startswith("{"))
        t = json.loads(line)
        out = [Metric("mnn_import_s", t["import_s"], "s"), Metric("mnn_load_s", t["load_s"], "s"),
               Metric("mnn_engine_load_s", t["mnn_load_us"] / 1e6, "s"),
               Metric("mnn_tokenize_s", t["tokenize_s"], "s"), Metric("mnn_prefill_s", t["prefill_s"], "s"),
               Metric("prompt_tokens", t["prompt_tokens"], "tokens"),
               Metric("tokens_match", float(t["prompt_ids"] == list(prompt_ids)), "bool")]
        if gen_tokens > 1:
            if t["decode_steps"] != gen_tokens - 1:
                raise ValueError(f"driver decoded {t['decode_steps']} steps, expected {gen_tokens - 1}")
            out += decode_metrics(t["decode_s"], t["decode_steps"], None,
                                  "not measured: MNN.llm's Python API shows no boundary between prefill and decode "
                                  "(both on the CPU, from the weights loaded once); whatever MNN prepares for decode "
                                  "falls into the first decode step, counted in decode_s")
        return out
    except (StopIteration, ValueError, KeyError) as e:
        raise EngineError(f"cannot parse the MNN driver's timings ({e}); stdout: {stdout[-300:]!r}", stderr) from None
