"""Flash emulation on this host: cgroup v1 blkio read throttling of the measured process.

A phone reads weights from UFS flash at a few hundred MB/s while this VM's disk gives ~2.7 GB/s, so on this host cold
start is compute-bound where a phone is flash-bound. `device.flash_read_mbps` puts the measured process into a blkio
cgroup whose `blkio.throttle.read_bps_device` limits reads from the block device that holds the model files. The
limit applies at the block layer, so it throttles every way a system reads alike: read()/pread() of our runtime,
buffered reads, readahead and mmap page faults of llama.cpp and MNN (measured: an evicted 136 MB file read through
mmap page faults in a throttled process came at 209 MB/s for a 209.7 MB/s setting). Pages already in the page cache
are not throttled, which is why every run evicts the model files first.

Why not FUSE: a FUSE passthrough would also throttle, but it changes the I/O path (an extra copy, request size
limits, a daemon competing for the 2 cores) and needs page-cache eviction at two levels. The cgroup changes nothing
but the rate. It needs root and a writable cgroup v1 blkio hierarchy (present here: /sys/fs/cgroup/blkio).
"""
from __future__ import annotations

import os
from pathlib import Path

BLKIO_ROOT = Path("/sys/fs/cgroup/blkio")


class ThrottleUnavailable(RuntimeError):
    """Flash emulation cannot be set up on this host; the message says why."""


def block_device_of(path: str | Path) -> str:
    """'major:minor' of the whole disk holding `path` (blkio limits apply to disks, not partitions)."""
    dev = os.stat(path).st_dev
    major, minor = os.major(dev), os.minor(dev)
    sys_dev = Path(f"/sys/dev/block/{major}:{minor}")
    if (sys_dev / "partition").exists():  # a partition: its parent directory is the disk
        major_minor = (sys_dev.resolve().parent / "dev").read_text().strip()
        return major_minor
    if not sys_dev.exists():
        raise ThrottleUnavailable(f"{path} is not on a block device (st_dev {major}:{minor}; tmpfs or overlay?)")
    return f"{major}:{minor}"


class BlkioThrottle:
    """A blkio cgroup limiting reads from one disk to `mbps` MB/s (10^6 bytes per second)."""

    def __init__(self, mbps: float, model_path: str | Path, name: str = "edgeflow-bench"):
        if not mbps > 0:
            raise ValueError(f"device.flash_read_mbps must be > 0 MB/s (or null for native speed), got {mbps}")
        if not (BLKIO_ROOT / "blkio.throttle.read_bps_device").exists():
            raise ThrottleUnavailable(f"no cgroup v1 blkio hierarchy at {BLKIO_ROOT}: flash emulation needs one")
        self.mbps = float(mbps)
        self.device = block_device_of(model_path)
        self.cgroup = BLKIO_ROOT / f"{name}-{os.getpid()}"
        try:
            self.cgroup.mkdir(exist_ok=True)
            (self.cgroup / "blkio.throttle.read_bps_device").write_text(f"{self.device} {int(self.mbps * 1e6)}\n")
        except OSError as e:
            raise ThrottleUnavailable(f"cannot configure {self.cgroup} ({e}); flash emulation needs root") from e

    def join(self, pid: int | None = None) -> None:
        """Move a process (default: the calling one; use from a child's preexec_fn) into the throttled group."""
        (self.cgroup / "cgroup.procs").write_text(f"{pid or os.getpid()}\n")

    def bytes_read(self) -> int:
        """Bytes read from the throttled disk by processes of this group so far (blkio's own accounting)."""
        stats = (self.cgroup / "blkio.throttle.io_service_bytes").read_text()
        for line in stats.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[0] == self.device and parts[1] == "Read":
                return int(parts[2])
        return 0

    def close(self) -> None:
        """Remove the group (possible only once its processes have exited)."""
        try:
            self.cgroup.rmdir()
        except OSError:
            pass
