"""The cache folder for converted models, datasets and native builds, and a note for long one-time steps."""
from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import sys
import tempfile
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
def progress_note(what: str, ledger: tuple[str, str | os.PathLike] | None = None):
    """Say what a long step is doing and how long it took (on stderr, so JSON on stdout stays clean); with
    `ledger` = (kind, key), a step that prepares a cached thing is recorded as made (harness/cache_ledger.py)."""
    from harness.cache_ledger import cache_made

    start = time.monotonic()
    print(f"[edgeflow-bench] {what} ...", file=sys.stderr, flush=True)
    yield
    seconds = time.monotonic() - start
    print(f"[edgeflow-bench] {what}: done in {seconds:.1f} s", file=sys.stderr, flush=True)
    if ledger is not None:
        cache_made(*ledger, seconds)


@contextlib.contextmanager
def exclusive(lock: Path):
    """Hold an exclusive lock on the file `lock` (created if missing) for the block: processes that would build the
    same cache entry (a parallel sweep's points, the test suite's workers) take turns, and the later ones find it
    built. One lock file per step: a process that nests two steps must not take the same file twice (flock locks
    belong to an open file, so the second open would wait for the first forever)."""
    lock = Path(lock)
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        yield


@contextlib.contextmanager
def atomic_directory(out: Path, keep_existing: bool = False):
    """Yield a temporary directory beside `out`, renamed to `out` only when the block finishes without error.

    An interrupted writer leaves no `out` (or the old one), never a half-written directory that looks complete.
    keep_existing: for a cache entry that parallel processes may build at once, the first to finish keeps its
    `out` (complete, since only whole directories are renamed into place) and later writers discard theirs, so an
    entry is never replaced under a reader.
    """
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        yield tmp
        if keep_existing:
            try:
                os.rename(tmp, out)  # atomic; fails when another writer's `out` is already there
            except OSError:
                if not out.is_dir():
                    raise
        else:
            shutil.rmtree(out, ignore_errors=True)
            os.replace(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def atomic_file(out: Path):
    """Yield a temporary path beside `out`, renamed to `out` only when the block finishes without error (else
    removed): a reader never sees a half-written file under `out`'s name."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # the permissions open() would give it (mkstemp makes it private)
    try:
        yield Path(tmp)
        os.replace(tmp, out)
    finally:
        Path(tmp).unlink(missing_ok=True)
