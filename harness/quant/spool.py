"""Per-linear results kept on disk between two passes over a model's linears.

The A16 pass (base.Quantizer) quantizes every linear for both activation widths before it knows which width each
gets; the main pass then takes the result of the width chosen instead of quantizing the linear once more (with GPTQ
rounding that third quantization was a third of the time). One file per linear in a temporary folder (under TMPDIR,
private to the user), so memory holds one linear's results at a time at any model size, and disk at most the
artifact's linears twice over (8B shape: ~14 GB); the folder is removed when the spool closes.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import torch


class ResultSpool:
    """{linear name: {width: result}} on disk; `take` returns one width's result and deletes the linear's file."""

    def __init__(self, allowed: list[type]):
        self._allowed = allowed  # the classes the results are made of (loaded with torch's weights-only unpickler)
        self._dir: tempfile.TemporaryDirectory | None = None

    def __enter__(self) -> "ResultSpool":
        # (a folder removed under it must not turn the error put() raises into a cleanup's FileNotFoundError)
        self._dir = tempfile.TemporaryDirectory(prefix="edgeflow-quant-spool-", ignore_cleanup_errors=True)
        return self

    def __exit__(self, *exc) -> None:
        self._dir.cleanup()

    def put(self, name: str, results: dict) -> None:
        if not Path(self._dir.name).is_dir():  # (torch would say only "Parent directory ... does not exist")
            raise RuntimeError(f"the quantizer's spool folder {self._dir.name} was removed while it quantized; "
                               "quantize again")
        torch.save(results, self._path(name))  # (results shared between widths are stored once)

    def take(self, name: str, width: int):
        """The result of `name` at `width`, or None if none was put."""
        path = self._path(name)
        if not path.is_file():
            return None
        with torch.serialization.safe_globals(self._allowed):
            results = torch.load(path, weights_only=True)
        path.unlink()
        return results[width]

    def _path(self, name: str) -> Path:
        return Path(self._dir.name) / f"{name}.pt"
