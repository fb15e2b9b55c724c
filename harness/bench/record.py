"""A benchmark's rows into the results store, beside the experiments' (so `make report` shows them): experiment
`bench-<name>`, one part file per run, every row with the run's provenance (commit, host, time, the CPU and its SIMD
flags in device_info) and the load average when it was measured."""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from harness.host import cpu_flags, cpu_model
from harness.runner import provenance
from harness.runner.store import ResultsStore

SIMD_FLAGS = ("avx2", "avx_vnni", "avx512f", "avx512_vnni", "avx512_bf16", "asimd", "asimddp", "i8mm", "sve")


def cpu_info() -> dict:
    """The host's CPU model, cores and the SIMD flags our kernels dispatch on."""
    return {"cpu": cpu_model() or "unknown", "cores": os.cpu_count(),
            "simd": [f for f in SIMD_FLAGS if f in cpu_flags()]}


class BenchRecorder:
    def __init__(self, name: str, config: dict, store: ResultsStore | None = None):
        """`config`: what the run was asked to do (its options); runs with the same config are one configuration,
        of which readers count the latest (experiments.selection.current)."""
        self.experiment = f"bench-{name}"
        self.store = store or ResultsStore()
        self.config_hash = hashlib.sha256(json.dumps([name, config], sort_keys=True, default=str).encode()).hexdigest()[:16]
        self.device_info = json.dumps({**cpu_info(), "config": config}, default=str)
        self.rows: list[dict] = []

    def add(self, metric: str, value: float | None, unit: str, *, repetition: int = 0, notes: str = "",
            label: str = "measured", load: float | None = None, **columns) -> None:
        """One measurement; `load`: the 1-minute load average when it was taken (default: now); `columns` are other
        store columns (system, model, bits, packing, variant, ...)."""
        load = os.getloadavg()[0] if load is None else load
        self.rows.append({"metric": metric, "value": None if value is None else float(value), "unit": unit,
                          "repetition": repetition, "status": "ok", "label": label, "device": "local",
                          "notes": notes or None, "load_avg_1m": load,
                          "config_hash": self.config_hash, "git_commit": provenance.git_commit(),
                          "host": provenance.host(), "device_info": self.device_info, "time": provenance.now(),
                          **columns})

    def add_comparison(self, entries, reference: str | None = None, **columns) -> None:
        """The cold runs of a harness.measure.compare comparison: per entry and repetition its TTFT (variant = the
        entry's label) and, with a `reference` entry, the ratio to the reference's run of the same round."""
        ref = next((e for e in entries if e.label == reference), None)
        for e in entries:
            loads = e.values("load_avg_1m")
            for i, ttft in enumerate(e.values("ttft_s")):
                load = loads[i] if i < len(loads) else None
                self.add("ttft_s", ttft, "s", repetition=i, system=e.system.name, variant=e.label, load=load,
                         **columns)
                if ref is not None and e is not ref:
                    self.add("ttft_ratio", ttft / ref.values("ttft_s")[i], "x", repetition=i, system=e.system.name,
                             variant=e.label, load=load, notes=f"over {reference}, same round", **columns)

    def save(self) -> Path | None:
        """Append the rows as one part file (one attempt); returns its path."""
        path = self.store.append(self.experiment, self.rows)
        if path:
            print(f"[bench] {len(self.rows)} rows -> {path}")
        return path
