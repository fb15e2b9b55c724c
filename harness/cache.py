"""The cache folder for converted models, datasets and native builds, and a note for long one-time steps."""
from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path


def cache_root() -> Path:
    root = os.environ.get("EDGEFLOW_CACHE") or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "edgeflow-bench"
    return Path(root).expanduser()


def cache_dir(*parts: str) -> Path:
    path = cache_root().joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def progress_note(what: str):
    """Say what a long step is doing and how long it took (on stderr, so JSON on stdout stays clean)."""
    start = time.monotonic()
    print(f"[edgeflow-bench] {what} ...", file=sys.stderr, flush=True)
    yield
    print(f"[edgeflow-bench] {what}: done in {time.monotonic() - start:.1f} s", file=sys.stderr, flush=True)
