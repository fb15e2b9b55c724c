"""What this host is and has free: its CPU's feature flags (for picking kernels), and memory for refusing work
that cannot fit before it starts (and is OOM-killed minutes later)."""
from __future__ import annotations

import functools
from pathlib import Path


def mem_available() -> int | None:
    """Bytes of memory available to new work (/proc/meminfo's MemAvailable), None where unknown."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def memory_shortfall(checkpoint: Path, bytes_per_param: float) -> tuple[float, float, int] | None:
    """(bytes needed, parameters, bytes available) when work holding bytes_per_param per parameter of an FP16
    checkpoint would not fit in the available memory; None when it fits or the available memory is unknown."""
    params = sum(f.stat().st_size for f in Path(checkpoint).glob("*.safetensors")) / 2  # FP16 checkpoints
    need, available = params * bytes_per_param, mem_available()
    return (need, params, available) if available is not None and need > available else None


@functools.cache
def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags (/proc/cpuinfo's `flags` on x86, `Features` on Arm); empty where unknown."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("flags", "Features"):
                return frozenset(value.split())
    except OSError:
        pass
    return frozenset()
