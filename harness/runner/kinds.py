"""What each `experiment.kind` measures. A kind is a generator taking a Job and yielding rows (`job.row(...)`)."""
from __future__ import annotations

from typing import Callable, Iterator


class NotRunError(RuntimeError):
    """This configuration cannot run here (no phone, no hub, no SDK); the reason is recorded as a 'not run' row."""


def smoke(job) -> Iterator[dict]:
    """Convert the model if needed and report its size: the first check of a new machine."""
    from harness.models.zoo import checkpoint_dir, load_model

    model, _ = load_model(job.model)
    params = sum(p.numel() for p in model.parameters())
    yield job.row("parameters", params, "count", notes=str(checkpoint_dir(job.model)))


def ttft(job) -> Iterator[dict]:
    from harness.measure.ttft import ttft as run

    yield from run(job)


KINDS: dict[str, Callable[..., Iterator[dict]]] = {"smoke": smoke, "ttft": ttft}
