"""'The same work': what every engine in a cold-TTFT comparison is given, recorded in every row, checked identical.

A comparison of engines is fair only when each one does the same work. A `Workload` fixes all of it:
  - `token_ids`: the prompt as token ids. Engines that take text (llama-completion) are given the ids' decoded text
    and the system checks that its tokenizer gives the ids back (harness.systems.llamacpp);
  - `ctx`: the context (KV cache) size every engine allocates. By default the request's: the smallest size that
    every engine can honour for this prompt (`request_ctx`), not the model's 8192 positions: allocating and clearing
    a KV cache of 8192 positions is work the request does not need, and it was once given to llama.cpp only;
  - `threads`: the compute-thread budget, handed to each engine's own thread flag;
  - `timed_event`: what stops the clock. `first_token`: wall clock from spawning the process to the read that
    delivers the first generated token on its stdout (flushed by the engine). `exit` (spawn to exit) exists only so
    that a mismatch can be named; no system times it now;
  - `cold`: the cache state at spawn. `evicted+verified`: every file the engine reads evicted from the page cache
    and its residency checked (harness.measure.cold.evict_verified) before the spawn.
`check_same` raises WorkloadMismatch naming the differing field when two systems of one comparison were given
different work. `settings()` is the one-line record kept in every result row (column `workload`).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, fields
from functools import lru_cache

TIMED_EVENTS = ("first_token", "exit")
COLD_STATES = ("evicted+verified",)
# llama.cpp rounds its KV cache up to a multiple of 256 cells (llama_context: GGML_PAD(n_ctx, 256)), and
# llama-completion refuses a prompt longer than n_ctx - 4: the request's context is therefore the prompt + 4
# positions rounded up to 256, a size every engine here can allocate exactly.
CTX_ALIGN = 256
CTX_SPARE = 4


class WorkloadMismatch(ValueError):
    """Two systems in one comparison were given different work; the message names the field and both values."""


def request_ctx(n_prompt: int, new_tokens: int = 1) -> int:
    """The context size of a request of n_prompt tokens generating new_tokens: the positions it uses plus the
    spare positions llama-completion needs, rounded up to the KV-cache granularity every engine honours."""
    if n_prompt < 1 or new_tokens < 1:
        raise ValueError(f"a request needs >= 1 prompt token and >= 1 new token (got {n_prompt}, {new_tokens})")
    need = n_prompt + max(new_tokens, CTX_SPARE)
    return -(-need // CTX_ALIGN) * CTX_ALIGN


@dataclass(frozen=True)
class Workload:
    token_ids: tuple[int, ...]
    ctx: int
    threads: int
    timed_event: str = "first_token"
    cold: str = "evicted+verified"
    new_tokens: int = 1  # tokens generated per run, the first included (> 1: greedy decode after it, Figure 15)

    def __post_init__(self):
        object.__setattr__(self, "token_ids", tuple(int(t) for t in self.token_ids))
        if not self.token_ids or min(self.token_ids) < 0:
            raise ValueError("workload.token_ids must be a non-empty sequence of ids >= 0")
        if not 1 <= self.new_tokens <= 65536:
            raise ValueError(f"workload.new_tokens must be an integer in [1, 65536], got {self.new_tokens}")
        if self.ctx < len(self.token_ids) + self.new_tokens:
            raise ValueError(f"workload.ctx={self.ctx} cannot hold the {len(self.token_ids)}-token prompt and "
                             f"{self.new_tokens} generated token(s)")
        if not 1 <= self.threads <= 256:
            raise ValueError(f"workload.threads must be an integer in [1, 256], got {self.threads}")
        if self.timed_event not in TIMED_EVENTS:
            raise ValueError(f"workload.timed_event must be one of {TIMED_EVENTS}, got {self.timed_event!r}")
        if self.cold not in COLD_STATES:
            raise ValueError(f"workload.cold must be one of {COLD_STATES}, got {self.cold!r}")

    @classmethod
    def for_request(cls, token_ids, threads: int, ctx: int | None = None, new_tokens: int = 1, **kw) -> "Workload":
        """The workload of one prompt: ctx None means the request's size (`request_ctx`), an int one value given
        to every engine."""
        ids = tuple(token_ids)
        size = request_ctx(len(ids), int(new_tokens)) if ctx is None else int(ctx)
        return cls(ids, size, int(threads), new_tokens=int(new_tokens), **kw)

    @property
    def n_prompt(self) -> int:
        return len(self.token_ids)

    def tokens_digest(self) -> str:
        """A short hash of the token ids: rows of the same prompt carry the same digest."""
        return hashlib.sha256(",".join(map(str, self.token_ids)).encode()).hexdigest()[:12]

    def settings(self) -> str:
        """The record kept in every row (JSON, keys sorted): everything but the ids themselves."""
        return json.dumps({"prompt_tokens": self.n_prompt, "tokens_sha256_12": self.tokens_digest(), "ctx": self.ctx,
                           "threads": self.threads, "timed_event": self.timed_event, "cold": self.cold,
                           "new_tokens": self.new_tokens},
                          sort_keys=True)


def check_same(workloads: dict[str, Workload]) -> Workload:
    """The one workload of a comparison {system label: workload}; WorkloadMismatch naming the first differing
    field (token ids, ctx, threads, timed event, cold state) and the systems and values otherwise."""
    if not workloads:
        raise ValueError("a comparison needs at least one system")
    (first_name, first), *rest = workloads.items()
    for name, w in rest:
        for f in fields(Workload):
            a, b = getattr(first, f.name), getattr(w, f.name)
            if a != b:
                shown = (f"{len(a)} ids sha {first.tokens_digest()}", f"{len(b)} ids sha {w.tokens_digest()}") \
                    if f.name == "token_ids" else (a, b)
                raise WorkloadMismatch(f"not the same work: {f.name} differs between {first_name} ({shown[0]}) and "
                                       f"{name} ({shown[1]}); every system in a comparison must be given one workload")
    return first


def check_rows(rows, by: tuple[str, ...] = ("model", "dataset")) -> None:
    """A figure's check on stored ttft rows: within each `by` group (one comparison), every system's rows record the
    same context rule, threads, timed event and cold state (the `workload` column; prompts may differ between a
    dataset's prompts, not between systems). Rows without a record (measured before it existed, or synthetic) are
    not checked, but a group mixing recorded and unrecorded systems is refused: their work cannot be compared.
    A system that says it could not be given the workload (llm.npu's demo runs its own prompt) is left out: its
    rows carry that statement."""
    if "workload" not in rows.columns or rows.empty:
        return
    for key, group in rows.groupby(list(by)):
        where = dict(zip(by, key if isinstance(key, tuple) else (key,)))
        per_system = {}
        for system, g in group.groupby("system"):
            recs = {_comparable(w) for w in g["workload"]} - {"own"}
            if recs:
                per_system[system] = recs
        recorded = {s for s, r in per_system.items() if r != {None}}
        if recorded and len(recorded) != len(per_system):
            raise WorkloadMismatch(f"{where}: systems {sorted(set(per_system) - recorded)} have no workload record, "
                                   f"{sorted(recorded)} do: re-measure them with the same workload")
        settings = {s: per_system[s] for s in sorted(recorded)}
        if len({frozenset(v) for v in settings.values()}) > 1:
            raise WorkloadMismatch(f"{where}: not the same work across systems: {settings}")


def _comparable(recorded) -> str | None:
    """The settings of a row's workload record that must match across systems (the prompt itself may vary); None
    for no record, "own" for a system's statement that it runs its own work."""
    if recorded is None or recorded != recorded:  # None or NaN
        return None
    if not str(recorded).startswith("{"):
        return "own"
    rec = json.loads(recorded)
    settings = {k: rec[k] for k in ("ctx", "threads", "timed_event", "cold")}
    settings["new_tokens"] = rec.get("new_tokens", 1)  # recorded since Figure 15's decode runs; 1 before
    return json.dumps(settings, sort_keys=True)


def prompt_text(work: Workload, checkpoint) -> str:
    """The workload's prompt as text, its ids decoded by the model's tokenizer: what every engine is given (each
    tokenizes it inside its own clock and reports the ids it got, checked against work.token_ids)."""
    return tokenizer_of(checkpoint).decode(list(work.token_ids))


@lru_cache(maxsize=4)
def _tokenizer(checkpoint: str):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(checkpoint)


def tokenizer_of(checkpoint):
    """The checkpoint's tokenizer, loaded once per process (~0.5 s each; a sweep's TTFT points share it)."""
    return _tokenizer(str(checkpoint))


def prompt_file(work: Workload, suffix: str, text: str):
    """A file in the cache named by the prompt's digest holding `text` (what an engine reads the prompt from),
    written atomically when missing or different and kept, so that a printed command line can be run again."""
    import os

    from harness.cache import cache_dir

    path = cache_dir("prompts") / f"{work.tokens_digest()}{suffix}"
    if not path.is_file() or path.read_text() != text:
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(text)
        os.replace(tmp, path)
    return path
