"""Provenance recorded on every row: code version, host, time."""
from __future__ import annotations

import datetime
import functools
import platform
import subprocess
from pathlib import Path

_REPO = Path(__file__).resolve().parents[2]


@functools.cache
def git_commit() -> str:
    """HEAD of this checkout, with `-dirty` when tracked files have uncommitted changes; `unknown` outside git."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=_REPO, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=_REPO,
                               capture_output=True, text=True).stdout.strip()
        return head + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def host() -> str:
    return platform.node()
