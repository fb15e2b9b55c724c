"""Page-cache eviction and residency on this host, without root.

Eviction is posix_fadvise(POSIX_FADV_DONTNEED) per file: the kernel drops the file's clean cached pages
(/proc/sys/vm/drop_caches is not writable here, and it would evict everything else as well). Residency is mincore(2)
over a read-only shared mapping of the file: one byte per page, bit 0 set when the page is in the page cache.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
from pathlib import Path

_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte)]
_MAP_FAILED = ctypes.c_void_p(-1).value
PAGE = mmap.PAGESIZE


def evict_file(path: str | Path) -> None:
    """Drop a file's pages from the page cache (dirty pages are written back first by fdatasync)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def resident_pages(path: str | Path) -> tuple[int, int]:
    """(pages in the page cache, pages in the file) by mincore over a PROT_READ mapping (which faults nothing in)."""
    size = os.path.getsize(path)
    pages = (size + PAGE - 1) // PAGE
    if size == 0:
        return 0, 0
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = _libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, _MAP_FAILED):
            raise OSError(ctypes.get_errno(), f"mmap of {path} failed")
        try:
            vec = (ctypes.c_ubyte * pages)()
            if _libc.mincore(addr, size, vec) != 0:
                raise OSError(ctypes.get_errno(), f"mincore on {path} failed")
            return sum(b & 1 for b in vec), pages
        finally:
            _libc.munmap(addr, size)
    finally:
        os.close(fd)


def resident_fraction(paths) -> float:
    """Fraction of all pages of `paths` (files, or directories walked recursively) that are in the page cache."""
    cached = total = 0
    for f in expand_files(paths):
        c, t = resident_pages(f)
        cached, total = cached + c, total + t
    return cached / total if total else 0.0


def evict(paths) -> float:
    """Evict every file of `paths` and return the resident fraction measured afterwards (the caller verifies it)."""
    for f in expand_files(paths):
        evict_file(f)
    return resident_fraction(paths)


def preload(paths, fraction: float, chunk: int = 1 << 20) -> float:
    """Read the first `fraction` of every file's bytes into the page cache (an app prefetching its model before the
    user asks, Figure 2); returns the resident fraction measured afterwards. Reads happen in this process, outside any
    flash throttle: preloading is not part of the measured cold start."""
    for f in expand_files(paths):
        todo = int(os.path.getsize(f) * fraction)
        with open(f, "rb", buffering=0) as fh:
            os.posix_fadvise(fh.fileno(), 0, 0, os.POSIX_FADV_RANDOM)  # no readahead past the prefix
            while todo > 0 and (got := len(fh.read(min(chunk, todo)))):
                todo -= got
    return resident_fraction(paths)


def expand_files(paths) -> list[Path]:
    """Files named by `paths`; directories are expanded to the regular files below them. A missing path is an error."""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out.extend(sorted(f for f in p.rglob("*") if f.is_file()))
        elif p.is_file():
            out.append(p)
        else:
            raise FileNotFoundError(f"cannot evict {p}: no such file or directory")
    return out
