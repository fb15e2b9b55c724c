"""What this host is and has free: its CPU's feature flags (for picking kernels), and memory for refusing work
that cannot fit before it starts (and is OOM-killed minutes later); and how this process's allocator keeps memory
while it evaluates."""
from __future__ import annotations

import contextlib
import ctypes
import functools
from pathlib import Path
from typing import Iterator


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
def _cpuinfo() -> dict[str, str]:
    """/proc/cpuinfo's first processor: {key: value} (the one place that reads the file); {} where it is unreadable."""
    out: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            out.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    return out


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags (/proc/cpuinfo's `flags` on x86, `Features` on Arm); empty where unknown."""
    info = _cpuinfo()
    return frozenset((info.get("flags") or info.get("Features") or "").split())


def cpu_model() -> str:
    """The CPU's model name ('' where /proc/cpuinfo has none, as on many Arm kernels)."""
    return _cpuinfo().get("model name", "")


# glibc's mallopt parameters (malloc/malloc.h), and the thresholds its own adaptation reaches once a large block has
# been freed (mmap: at most DEFAULT_MMAP_THRESHOLD_MAX, 32 MiB on 64-bit; trim: twice that)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_MMAP_MAX = -1, -3, -4
_ADAPTED_MMAP_THRESHOLD, _ADAPTED_TRIM_THRESHOLD, _DEFAULT_MMAP_MAX = 32 << 20, 64 << 20, 65536


@functools.cache
def _glibc():
    libc = ctypes.CDLL(None)
    return libc if hasattr(libc, "gnu_get_libc_version") and hasattr(libc, "malloc_trim") else None


@contextlib.contextmanager
def heap_kept() -> Iterator[None]:
    """Inside, glibc's malloc serves every block from its heap and keeps what is freed; on exit the free memory goes
    back to the system. Why: a forward pass over a 2048-token window allocates ~0.4 GB of logits and a few MB per
    activation; above malloc's mmap threshold each is a fresh mapping whose pages the kernel faults in and zeroes
    again (200-600k page faults per window), 5-10% of an evaluation's time on a 2-core host. Setting any threshold
    stops glibc adapting them, so on exit they are fixed where its adaptation ends (32 MiB mmap, 64 MiB trim), not
    at the small initial ones. Only this process changes (the engines under test are children with their own
    allocator); elsewhere than glibc nothing does."""
    libc = _glibc()
    if libc is None:
        yield
        return
    libc.mallopt(_M_MMAP_MAX, 0)
    libc.mallopt(_M_TRIM_THRESHOLD, 1 << 30)
    try:
        yield
    finally:
        libc.mallopt(_M_MMAP_MAX, _DEFAULT_MMAP_MAX)
        libc.mallopt(_M_MMAP_THRESHOLD, _ADAPTED_MMAP_THRESHOLD)
        libc.mallopt(_M_TRIM_THRESHOLD, _ADAPTED_TRIM_THRESHOLD)
        libc.malloc_trim(0)
