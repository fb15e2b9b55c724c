"""Which prepared things a run took from the cache and which it made: calibration statistics, quantized artifacts,
packed files, GGUF conversions and quantizations, MNN exports, perplexity windows (made only: the windows a job
reused are counted in its perplexity row's notes).

    cache_hit("quantized artifact", path)                 # found; one line on stderr
    with progress_note("quantizing ...", ledger=("quantized artifact", path)): ...   # made, and how long it took

Every event goes to this process's `events()` and, when EDGEFLOW_CACHE_LEDGER names a file, is appended to it as one
JSON line, so the processes of a parallel sweep share one ledger (experiments/run.py points it at the results store).
`summary` counts hits and makes per kind and names every key made more than once: in one reproduction, preparing the
same thing twice is a bug (a cache key that moved, or two processes racing to build it).

    python -m harness.cache_ledger results/runs/cache-ledger.jsonl
"""
from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

LEDGER_ENV = "EDGEFLOW_CACHE_LEDGER"

_events: list[dict] = []


def cache_hit(kind: str, key: str | os.PathLike) -> None:
    print(f"[edgeflow-bench] from the cache: {kind} {_short(key)}", file=sys.stderr, flush=True)
    _record(kind, key, None)


def cache_made(kind: str, key: str | os.PathLike, seconds: float) -> None:
    _record(kind, key, seconds)


def _record(kind: str, key, made_s: float | None) -> None:
    event = {"kind": kind, "key": str(key), "hit": made_s is None, "made_s": made_s, "pid": os.getpid(),
             "time": time.time()}
    _events.append(event)
    ledger = os.environ.get(LEDGER_ENV)
    if ledger:
        Path(ledger).parent.mkdir(parents=True, exist_ok=True)
        with open(ledger, "a") as f:  # one short write per line: appends from parallel processes do not interleave
            f.write(json.dumps(event) + "\n")


def _short(key) -> str:
    """The key's last two path parts (model folder / file: GGUF files are all named Q8_0.gguf)."""
    return "/".join(Path(key).parts[-2:])


@contextlib.contextmanager
def ledger_at(path: str | os.PathLike):
    """Record the block's events (this process's and its children's) in `path` unless EDGEFLOW_CACHE_LEDGER already
    names a ledger; yields a function returning the events recorded since the block began."""
    previous = os.environ.get(LEDGER_ENV)
    target = previous or str(path)
    os.environ[LEDGER_ENV] = target
    start = time.time()
    try:
        yield lambda: [e for e in read(target) if e["time"] >= start]
    finally:
        if previous is None:
            del os.environ[LEDGER_ENV]


def events() -> list[dict]:
    """This process's events, oldest first."""
    return list(_events)


def read(path: str | os.PathLike) -> list[dict]:
    path = Path(path)
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []


def summary(evts: list[dict]) -> dict[str, dict]:
    """Per kind: hits, made, seconds spent making, and the keys made more than once."""
    out: dict[str, dict] = defaultdict(lambda: {"hits": 0, "made": 0, "made_s": 0.0, "made_twice": []})
    made = Counter()
    for e in evts:
        s = out[e["kind"]]
        if e["hit"]:
            s["hits"] += 1
        else:
            s["made"] += 1
            s["made_s"] += e["made_s"]
            made[(e["kind"], e["key"])] += 1
    for (kind, key), n in made.items():
        if n > 1:
            out[kind]["made_twice"].append(key)
    return dict(out)


def report(evts: list[dict]) -> str:
    lines = []
    for kind, s in sorted(summary(evts).items()):
        line = f"{kind}: {s['hits']} from the cache, {s['made']} made ({s['made_s']:.0f} s)"
        if s["made_twice"]:
            line += f"; MADE MORE THAN ONCE: {', '.join(map(_short, s['made_twice']))}"
        lines.append(line)
    return "\n".join(lines) or "no cache lookups recorded"


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python -m harness.cache_ledger LEDGER.jsonl")
    print(report(read(sys.argv[1])))
