"""`python -m harness.measure.bench_baselines [REPS] [MBPS]`: cold TTFT of llama.cpp Q8_0 and MNN INT8 on the default
model, a 128-token corpus prompt, 2 threads, at native read speed and at an emulated MBPS (default 200) MB/s.

Repetitions are interleaved (rep 1 of every configuration, then rep 2, ...) so that a change in the host's load
touches every configuration alike; each run is the shared cold protocol (evict + verify, fresh process). Prints the
median and spread per configuration, the load average seen, and ratios against peers measured in the same run."""
from __future__ import annotations

import statistics
import sys

from omegaconf import OmegaConf
from transformers import AutoTokenizer

from harness.cli import CONF_DIR
from harness.config import build
from harness.devices import get_device
from harness.measure.cold import ProtocolConfig
from harness.data.prompts import fixed_length_prompts
from harness.models.zoo import ModelSpec, checkpoint_dir
from harness.systems import SystemConfig, get_system


def main(reps: int = 5, mbps: float = 200.0) -> None:
    model = build(ModelSpec, OmegaConf.load(f"{CONF_DIR}/model/smollm2-135m.yaml"), "model")
    ids = list(fixed_length_prompts(AutoTokenizer.from_pretrained(checkpoint_dir(model)), 128, 1)[0].ids)
    protocol = ProtocolConfig(repetitions=1, warmup_runs=0, busy_policy="flag")
    devices = {"native": get_device({"name": "local"}), f"{mbps:g} MB/s": get_device({"name": "local", "flash_read_mbps": mbps})}
    systems = {name: get_system(SystemConfig(name=name, threads=2)) for name in ("llamacpp", "mnn")}
    prepared = {name: s.prepare(model, 8, devices["native"]) for name, s in systems.items()}
    ttft: dict[tuple[str, str], list[float]] = {}
    loads: list[float] = []
    try:
        for rep in range(reps + 1):  # rep 0 is the warm-up of every configuration, discarded
            for name, system in systems.items():
                for flash, device in devices.items():
                    m = system.run_cold(prepared[name], ids, device, protocol)
                    if rep:
                        ttft.setdefault((name, flash), []).extend(m.values("ttft_s"))
                        loads.extend(m.values("load_avg_1m"))
    finally:
        for d in devices.values():
            d.close()
    print(f"cold TTFT, {len(ids)}-token prompt, 2 threads, {reps} interleaved repetitions; "
          f"1-min load average {min(loads):.2f}-{max(loads):.2f} (median {statistics.median(loads):.2f})")
    med = {k: statistics.median(v) for k, v in ttft.items()}
    for (name, flash), v in ttft.items():
        print(f"  {name:9s} {flash:>11s}: median {med[name, flash]:.3f} s  min {min(v):.3f}  max {max(v):.3f}  "
              f"all {[round(x, 3) for x in v]}")
    for flash in devices:
        print(f"  ratio mnn / llamacpp at {flash}: {med['mnn', flash] / med['llamacpp', flash]:.2f}")
    for name in systems:
        print(f"  ratio {mbps:g} MB/s / native for {name}: {med[name, f'{mbps:g} MB/s'] / med[name, 'native']:.2f}")


if __name__ == "__main__":
    args = sys.argv[1:]
    main(int(args[0]) if args else 5, float(args[1]) if len(args) > 1 else 200.0)
