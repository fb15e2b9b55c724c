"""What this host has free, for refusing work that cannot fit before it starts (and is OOM-killed minutes later)."""
from __future__ import annotations

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
