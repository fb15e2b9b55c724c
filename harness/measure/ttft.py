"""`experiment.kind: ttft`: cold TTFT of one system on one device, for every prompt of a prompt set.

Uses the groups system (conf/system), device (conf/device), protocol (conf/protocol) and prompts (conf/prompts) or,
when given, dataset (conf/dataset: prompt lengths in the dataset's Table 3 band, `prompts.count` of them), and
`experiment.extra.bits` (weight bits handed to the system's prepare; default 8). Yields one row per metric per
repetition per prompt; a metric a device cannot give (energy here) is a row with value null and the reason in notes.
Rows measured under flash emulation are labelled `emulated` and carry flash_emulated_mbps.
"""
from __future__ import annotations

import json
import sys
from typing import Iterator

from harness.config import build
from harness.devices import DeviceConfig, get_device
from harness.measure.cold import ProtocolConfig
from harness.measure.prompts import PromptsConfig, make_prompts
from harness.systems import NotRun, SystemConfig, get_system


def ttft(job) -> Iterator[dict]:
    from transformers import AutoTokenizer

    from harness.models.zoo import checkpoint_dir
    from harness.runner.kinds import NotRunError

    cfg = job.cfg
    if cfg.get("system") is None:
        raise ValueError("experiment ttft needs a system: add system=llamacpp|mnn|llmnpu")
    system = get_system(build(SystemConfig, cfg.system, "system"))
    device = get_device(build(DeviceConfig, cfg.device, "device"))
    protocol = build(ProtocolConfig, cfg.protocol, "protocol")
    prompts_cfg = build(PromptsConfig, cfg.get("prompts") or {}, "prompts")
    bits = int(job.experiment.extra.get("bits", 8))
    try:
        info = json.dumps(device.info())
        try:
            prepared = system.prepare(job.model, bits, device)
        except NotRun as e:
            raise NotRunError(str(e)) from None
        prompt_set_name, prompts, source = prompts_for(cfg, prompts_cfg,
                                                       AutoTokenizer.from_pretrained(checkpoint_dir(job.model)))
        emulated = device.flash_read_mbps is not None
        for p, ids in enumerate(prompts):
            measurement = system.run_cold(prepared, ids, device, protocol)
            s = measurement.summary("ttft_s")
            print(f"[edgeflow-bench] {system.name} prompt {p} ({len(ids)} tokens, flash "
                  f"{device.flash_read_mbps or 'native'}): TTFT median {s['median']:.3f} s, "
                  f"min {s['min']:.3f}, max {s['max']:.3f} over {s['n']}", file=sys.stderr)
            notes = "; ".join([f"prompt {p}", *source, *prepared.notes, *measurement.notes])
            for r, metrics in enumerate(measurement.repetitions):
                for m in metrics:
                    yield job.row(m.name, m.value, m.unit, repetition=r, bits=float(bits), dataset=prompt_set_name,
                                  prompt_tokens=len(ids), flash_emulated_mbps=device.flash_read_mbps,
                                  label="emulated" if emulated else "measured", device_info=info,
                                  notes="; ".join(x for x in (m.reason, m.detail, notes) if x))
    finally:
        device.close()


def prompts_for(cfg, prompts_cfg: PromptsConfig, tokenizer) -> tuple[str, list[list[int]], list[str]]:
    """(name, token-id prompts, source notes). With dataset=<name>: `prompts.count` prompts whose lengths follow the
    dataset's band (paper Table 3; corpus text, harness/data/prompts.py). Otherwise the prompts group's set."""
    if cfg.get("dataset") is None:
        return prompts_cfg.name, make_prompts(prompts_cfg, tokenizer), []
    from harness.data.config import DatasetConfig
    from harness.data.prompts import prompt_set

    dataset = build(DatasetConfig, cfg.dataset, "dataset")
    prompts = prompt_set(tokenizer, dataset, n=prompts_cfg.count)
    band = f"{dataset.prompt_tokens_min}-{dataset.prompt_tokens_max} tokens (Table 3)"
    return dataset.name, [list(p.ids) for p in prompts], [f"{prompts[0].source}, {band}"]
