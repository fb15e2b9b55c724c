"""Is the Hugging Face hub reachable? Asked once, fast, before anything that would otherwise retry for ~25 s.

`datasets` retries an unreachable hub five times with back-off (~25 s) before it gives up. A TCP connect with a
short timeout answers the same question at once. Offline mode is the user's choice (HF_HUB_OFFLINE=1 or
HF_DATASETS_OFFLINE=1, set before the process starts): then only the local Hugging Face cache is read.
"""
from __future__ import annotations

import os
import socket
import threading
from functools import lru_cache
from typing import Callable, TypeVar
from urllib.parse import urlparse

PROBE_TIMEOUT_S = 3.0
_OFFLINE_VARS = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
T = TypeVar("T")


class DatasetUnavailable(RuntimeError):
    """A dataset or task needs the hub (or a local copy of it) and neither is here; the message names both."""


@lru_cache(maxsize=None)
def hub_status() -> str:
    """'' when the hub answers, else the reason it cannot be used (an offline setting or the failed connection)."""
    for var in _OFFLINE_VARS:
        if os.environ.get(var, "").strip().lower() in ("1", "true", "yes", "on"):
            return f"{var}={os.environ[var]}"
    host = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co")).hostname or "huggingface.co"
    result: list[str] = []

    def probe():  # getaddrinfo has no timeout of its own: run it in a thread we can stop waiting for
        try:
            socket.create_connection((host, 443), timeout=PROBE_TIMEOUT_S).close()
            result.append("")
        except OSError as e:
            result.append(f"cannot connect to {host}:443 ({e})")

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(PROBE_TIMEOUT_S + 1)
    return result[0] if result else f"no answer from {host}:443 within {PROBE_TIMEOUT_S + 1:.0f} s"


def load_from_hub(what: str, load: Callable[[], T], alternative: str) -> T:
    """Run `load` (which reads a hub dataset) or fail at once with DatasetUnavailable naming `what` and the reason.

    Hub reachable: `load` runs as usual. HF_HUB_OFFLINE/HF_DATASETS_OFFLINE set: `load` reads the local cache only,
    and a miss is reported as unavailable. Otherwise (unreachable, nothing chosen): fail without calling `load`.
    """
    reason = hub_status()
    if reason and not reason.startswith("HF_"):
        raise DatasetUnavailable(
            f"{what} needs the Hugging Face hub, which is not reachable here ({reason}). Run it where the hub is "
            f"reachable; or, if the data is in the local Hugging Face cache, set HF_HUB_OFFLINE=1 "
            f"HF_DATASETS_OFFLINE=1; or {alternative}.")
    try:
        return load()
    except Exception as e:
        if not reason:
            raise
        raise DatasetUnavailable(f"{what}: not in the local Hugging Face cache ({reason}; {type(e).__name__}: "
                                 f"{str(e).splitlines()[0][:200]}). Or {alternative}.") from None
