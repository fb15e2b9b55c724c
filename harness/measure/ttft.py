"""`experiment.kind: ttft`: cold TTFT of one system on one device, for every prompt of a dataset's TTFT prompt set.

Uses the groups system (conf/system), device (conf/device), protocol (conf/protocol) and dataset (conf/dataset: its
`n_prompts` prompts with token counts in the paper's Table 3 band, from harness.data.prompts), and from
`experiment.extra`: `bits` (weight bits handed to the system's prepare; default 8) and optionally `prompt_tokens`
(fixed-length prompts instead of a dataset's band, e.g. 128 for the engine benchmarks), `n_prompts` (how many;
default: the dataset's n_prompts, or 1 for fixed lengths) and `ctx` (null: each request's context, see
harness/measure/workload.py; N: one context size for every prompt and system).
Every prompt is run as a Workload (token ids, ctx, system.threads, first-token timing, evicted-and-verified cold
state), the same definition `make bench-runtime` and `make bench-baselines` use; its settings are the `workload`
column of every row, and the ttft_s rows' notes carry the exact command line and what the engine reported of itself
(ISA, threads, context).
`gen_tokens` (tokens generated per run, the first included; default 1 = the cold start only; N > 1 decodes
greedily in the same cold process and adds decode_s, decode_tokens_per_s and graph_switch_s: Figure 15's completion
breakdown) is the workload's new_tokens: it sizes every engine's context alike.
Yields one row per metric per repetition per prompt; a metric a device cannot give (energy here) is a row with value
null and the reason in notes. Rows measured under flash emulation are labelled `emulated` and carry
flash_emulated_mbps; on a loopback phone (harness/devices/loopback) timings are `emulated` (qemu) and sensor
readings `stand-in` (scripted).
"""
from __future__ import annotations

import json
import shlex
import sys
from dataclasses import replace
from typing import Iterator

from harness.config import build
from harness.devices import get_device
from harness.measure.cold import ProtocolConfig
from harness.measure.workload import Workload, tokenizer_of
from harness.systems import NotRun, get_system


# Metrics read from the device's sensors: a loopback phone scripts them, so their label is the device's sensor_label.
SENSOR_METRICS = {"energy_j", "avg_power_w", "temp_before_c", "temp_peak_c"}


def ttft_prompts(job, tokenizer) -> tuple[str, list]:
    """(dataset label, prompts) for this job: fixed-length prompts if experiment.extra.prompt_tokens, else the
    dataset group's prompt set."""
    from harness.data.config import DatasetConfig
    from harness.data.prompts import fixed_length_prompts, prompt_set

    count, n = job.settings.n_prompts, job.settings.prompt_tokens
    if n:
        return f"fixed-{n}", fixed_length_prompts(tokenizer, n, count or 1)
    if job.cfg.get("dataset") is None:
        raise ValueError("experiment ttft needs prompts: dataset=<name> (conf/dataset) or "
                         "experiment.extra.prompt_tokens=<n>")
    dataset = build(DatasetConfig, job.cfg.dataset, "dataset")
    return dataset.name, prompt_set(tokenizer, dataset, n=count)


def ttft(job) -> Iterator[dict]:
    from harness.models.zoo import checkpoint_dir

    cfg = job.cfg
    if cfg.get("system") is None:
        raise ValueError("experiment ttft needs a system: add system=llamacpp|mnn|llmnpu")
    system = get_system(cfg.system)
    device = get_device(cfg.device)
    protocol = build(ProtocolConfig, cfg.protocol, "protocol")
    system.configure(cfg)
    n_gen = job.settings.gen_tokens
    bits = system.weight_bits(job.settings.bits)
    try:
        info = json.dumps(device.info())
        prepared = system.prepare(job.model, bits, device)
        if n_gen > 1 and not system.decodes:
            raise NotRun(f"{system.name} is measured here up to its first token only; it cannot decode "
                              f"experiment.extra.gen_tokens={n_gen} tokens")
        dataset, prompts = ttft_prompts(job, tokenizer_of(checkpoint_dir(job.model)))
        device_notes = [f"eviction: {device.eviction_method}"] if hasattr(device, "eviction_method") else []
        for i, prompt in enumerate(prompts):
            ids = list(prompt.ids)
            work = Workload.for_request(ids, system.cfg.threads, ctx=job.settings.ctx, new_tokens=n_gen)
            # the warm-up (binaries and libraries into the page cache) is needed once per configuration, not per prompt
            measurement = system.run_cold(prepared, work, device, protocol if i == 0 else replace(protocol, warmup_runs=0))
            s = measurement.summary("ttft_s")
            print(f"[edgeflow-bench] {system.name} {dataset} prompt {prompt.index} ({len(ids)} tokens, flash "
                  f"{device.flash_read_mbps or 'native'}): TTFT median {s['median']:.3f} s, "
                  f"min {s['min']:.3f}, max {s['max']:.3f} over {s['n']}", file=sys.stderr)
            notes = "; ".join([f"prompt {prompt.index} ({prompt.source})", *prepared.notes, *measurement.notes,
                               *device_notes])
            recorded = (measurement.workload.settings() if measurement.workload is not None else
                        "not the given workload: the engine runs its own prompt")
            run_notes = (f"engine: {json.dumps(measurement.engine, sort_keys=True)}; "
                         f"command: {shlex.join(measurement.command)}")
            for r, metrics in enumerate(measurement.repetitions):
                for m in metrics:
                    label = device.sensor_label if m.name in SENSOR_METRICS else device.timing_label
                    extra_notes = run_notes if m.name == "ttft_s" else None
                    same = dict(repetition=r, bits=float(bits), dataset=dataset, prompt_tokens=len(ids),
                                flash_emulated_mbps=device.flash_read_mbps, label=label, device_info=info,
                                workload=recorded, prompt_index=prompt.index, prompt_source=prompt.source,
                                **prepared.columns)
                    yield job.row(m.name, m.value, m.unit, **same,
                                  notes="; ".join(x for x in (m.reason, m.detail, notes, extra_notes) if x))
                    for t, v in m.timeline.samples if m.timeline else ():
                        yield job.row(m.timeline.metric, v, m.timeline.unit, at_s=t, **same)
    finally:
        device.close()
