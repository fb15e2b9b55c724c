"""`python -m harness.bench.baselines [REPS] [MBPS]`: cold TTFT of every baseline that runs on this host (systems with
their own weight format, harness/systems/base.py baselines(): llama.cpp Q8_0 and MNN INT8 here; llm.npu+ says why
not) on the default model, a 128-token corpus prompt, 2 threads, at native read speed and at an emulated MBPS
(default 200) MB/s.

Every configuration is given the same work (harness/measure/workload.py: the prompt's ids, the request's context,
2 threads, spawn -> first generated token, files evicted and verified). Repetitions are interleaved (rep 1 of every
configuration, then rep 2, ...) so that a change in the host's load touches every configuration alike
(harness/measure/compare.py). Prints, per configuration, the exact command line, the ISA the engine reported, the
median and spread, the load average seen, and ratios (with their spread) against peers measured in the same run."""
from __future__ import annotations

import sys

from transformers import AutoTokenizer

from harness.devices import get_device
from harness.measure.cold import ProtocolConfig
from harness.measure.compare import Entry, paired_ratios, print_comparison, run_interleaved, spread
from harness.measure.workload import Workload
from harness.data.prompts import fixed_length_prompts
from harness.models.zoo import DEFAULT_MODEL, checkpoint_dir, load_model_spec
from harness.bench.record import BenchRecorder
from harness.runner.store import ResultsStore
from harness.systems import NotRun, SystemConfig, get_system
from harness.systems.base import baselines

THREADS = 2


def main(reps: int = 5, mbps: float = 200.0, store: ResultsStore | None = None) -> None:
    model = load_model_spec(DEFAULT_MODEL)
    ids = list(fixed_length_prompts(AutoTokenizer.from_pretrained(checkpoint_dir(model)), 128, 1)[0].ids)
    work = Workload.for_request(ids, THREADS)  # one workload for every system and flash speed
    devices = {"native": get_device({"name": "local"}), f"{mbps:g} MB/s": get_device({"name": "local", "flash_read_mbps": mbps})}
    systems, prepared = {}, {}
    for name in baselines():
        system = get_system(SystemConfig(name=name, threads=THREADS))
        try:
            prepared[name] = system.prepare(model, 8, devices["native"])
        except NotRun as e:
            print(f"{name}: not run here: {e}")
            continue
        systems[name] = system
    reference = next(iter(systems))  # ratios against the first baseline that runs (by name: llama.cpp)
    entries = [Entry(f"{name} {flash}", system, prepared[name], device)
               for name, system in systems.items() for flash, device in devices.items()]
    try:
        run_interleaved(entries, work, reps, ProtocolConfig(busy_policy="flag"))
    finally:
        for d in devices.values():
            d.close()
    recorder = BenchRecorder("baselines", {"reps": reps, "mbps": mbps, "threads": THREADS}, store)
    for flash, device in devices.items():
        print(f"\n--- flash: {flash} ---")
        print_comparison([e for e in entries if e.label.endswith(flash)], reference=f"{reference} {flash}")
        recorder.add_comparison([e for e in entries if e.label.endswith(flash)], f"{reference} {flash}",
                                flash_emulated_mbps=device.flash_read_mbps, prompt_tokens=len(ids),
                                label="emulated" if device.flash_read_mbps else "measured")
    by = {e.label: e.values("ttft_s") for e in entries}
    print()
    for name in systems:
        r = paired_ratios(by[f"{name} {mbps:g} MB/s"], by[f"{name} native"])
        print(f"ratio {mbps:g} MB/s / native for {name}: {spread(r, '{:.2f}')}")
    recorder.save()


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--results=")]
    results = next((a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--results=")), None)
    main(int(args[0]) if args else 5, float(args[1]) if len(args) > 1 else 200.0, ResultsStore(results))
