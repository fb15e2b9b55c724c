"""harness/host.py's heap_kept, seen through glibc's own accounting (mallinfo2): inside it a large block comes from
malloc's heap, not a fresh mapping, and stays there when freed; on the way out the kept memory is returned and large
blocks are mappings again."""
import ctypes
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.host import _glibc, heap_kept

BLOCK = 64 << 20  # above the largest mmap threshold glibc adapts to by itself (32 MiB)
FIELDS = ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")


class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in FIELDS]


libc = ctypes.CDLL(None) if _glibc() is not None else None  # our own handle: the restypes below stay in this test
if libc is not None and hasattr(libc, "mallinfo2"):
    libc.mallinfo2.restype = MallInfo2
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]


def _mapped_and_heap() -> tuple[int, int]:
    """(bytes in mmap-ed blocks, bytes of heap malloc holds from the system)."""
    info = libc.mallinfo2()
    return info.hblkhd, info.arena


def _allocate_and_free() -> tuple[int, int]:
    """How (mapped, heap) bytes changed while a BLOCK was held; then the block is freed."""
    mapped, heap = _mapped_and_heap()
    block = libc.malloc(BLOCK)
    assert block
    grown = tuple(now - then for now, then in zip(_mapped_and_heap(), (mapped, heap)))
    libc.free(block)
    return grown


def _checks() -> None:
    assert _allocate_and_free()[0] >= BLOCK  # by default: its own mapping, unmapped when freed
    with heap_kept():
        assert _allocate_and_free()[0] == 0  # from the heap
        assert _allocate_and_free() == (0, 0)  # the freed block was kept and is reused
        held = _mapped_and_heap()[1]
    assert _mapped_and_heap()[1] <= held - BLOCK  # returned on the way out
    assert _allocate_and_free()[0] >= BLOCK


@pytest.mark.skipif(libc is None or not hasattr(libc, "mallinfo2"), reason="needs glibc >= 2.33 (mallinfo2)")
def test_large_blocks_stay_in_the_heap_only_inside():
    # in a fresh process: malloc serves a block from any free chunk big enough before it would map one, and a test
    # worker's heap may already hold such a chunk
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", "from tests.test_host import _checks; _checks()"], cwd=root,
                          env={**os.environ, "PYTHONPATH": str(root)}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
