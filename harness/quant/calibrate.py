"""Calibration statistics of every Llama projection's input and output, collected once per (model, data) and reused.

For each linear P (every module whose name ends in q/k/v/o/gate/up/down_proj, whatever the quantizer selects, so
one collection serves every quantizer, budget and layer pattern):
  in_max  float32 [D]   max |x[:, k]| over all calibration tokens (S_I of NPU-aware smoothing)
  out_max float32 [C]   max |y[:, c]| of the FP output (S_O)
  rows    float32 [N, D] N input rows sampled uniformly over all calibration tokens (the alpha grid search's data)
  gram    float32 [D, D] mean of x x^T over all calibration tokens, only when asked for (gram=True): what GPTQ's
                         rounding needs (gptq.py); D^2 floats per input, so not collected by default. Linears that
                         get the very same input tensor (q, k and v; gate and up) share one: one sum, one tensor
The FP model runs without its LM head (the statistics do not need logits).
"""
from __future__ import annotations

import contextlib
import hashlib
from dataclasses import dataclass

import torch
from torch import nn
from tqdm.auto import tqdm

from harness.artifact import LINEAR_SUFFIXES


@dataclass
class LinearStats:
    in_max: torch.Tensor  # float32 [D]
    out_max: torch.Tensor  # float32 [C]
    rows: torch.Tensor  # float32 [N, D]
    gram: torch.Tensor | None = None  # float32 [D, D] or None (not collected)


_CACHE: dict[tuple, dict[str, LinearStats]] = {}


def check_calibration(calibration, vocab_size: int) -> list[torch.Tensor]:
    """A list of 1-D token-id tensors, non-empty, ids within the vocabulary."""
    if calibration is None or len(calibration) == 0:
        raise ValueError("the calibration set is empty: pass a non-empty list of 1-D token-id tensors")
    out = []
    for i, seq in enumerate(calibration):
        seq = torch.as_tensor(seq)
        if seq.dim() != 1 or seq.numel() == 0 or seq.dtype not in (torch.int32, torch.int64):
            raise ValueError(f"calibration sequence {i} must be a non-empty 1-D integer tensor, got "
                             f"dtype {seq.dtype} shape {tuple(seq.shape)}")
        if int(seq.min()) < 0 or int(seq.max()) >= vocab_size:
            raise ValueError(f"calibration sequence {i} has token ids outside [0, {vocab_size})")
        out.append(seq.long())
    return out


def target_linears(model: nn.Module) -> dict[str, nn.Linear]:
    """Every quantizable projection of a Llama model, by module name."""
    return {n: m for n, m in model.named_modules() if isinstance(m, nn.Linear) and n.endswith(LINEAR_SUFFIXES)}


def collect_stats(model: nn.Module, calibration, sample_rows: int = 256, seed: int = 0,
                  gram: bool = False) -> dict[str, LinearStats]:
    """Statistics for every target linear (with Gram matrices if gram); cached in memory by (weights, data,
    sample_rows, seed, gram)."""
    calibration = check_calibration(calibration, model.config.vocab_size)
    key = (model_fingerprint(model), tokens_digest(calibration), sample_rows, seed, gram)
    if key not in _CACHE:
        _CACHE.clear()  # keep one model's statistics: a sweep reuses them, a new model replaces them
        _CACHE[key] = _collect(model, calibration, sample_rows, seed, gram)
    return _CACHE[key]


def _collect(model, calibration, sample_rows, seed, gram) -> dict[str, LinearStats]:
    linears = target_linears(model)
    if not linears:
        raise ValueError("the model has no q/k/v/o/gate/up/down_proj linear layers to calibrate")
    collector = StatsCollector(linears, sample_picks(calibration, sample_rows, seed), gram)
    body = getattr(model, "model", model)  # LlamaForCausalLM.model: the decoder without the LM head
    with collector, torch.inference_mode():
        for seq in tqdm(calibration, desc="calibration", unit="seq", leave=False):
            with collector.sequence(len(seq)):
                body(input_ids=seq[None], use_cache=False)
    return collector.stats()


def sample_picks(calibration: list[torch.Tensor], sample_rows: int, seed: int) -> torch.Tensor:
    """Sorted positions, in the concatenation of all calibration sequences, of the rows kept for the alpha search."""
    total = sum(len(s) for s in calibration)
    gen = torch.Generator().manual_seed(seed)
    return torch.sort(torch.randperm(total, generator=gen)[: min(sample_rows, total)]).values


class StatsCollector:
    """Forward hooks on some linears that accumulate their LinearStats while the calibration sequences pass, in
    order, one `sequence(length)` block each (rows are picked by position in the concatenated sequences); with
    gram=True also each input's Gram matrix."""

    def __init__(self, linears: dict[str, nn.Module], picks: torch.Tensor, gram: bool = False):
        self.linears, self.picks, self.gram = linears, picks, gram
        self._acc = {n: {"in": None, "out": None, "rows": [], "gram": 0.0, "tokens": 0, "gram_of": None}
                     for n in linears}
        self._offset, self._length, self._handles = 0, 0, []
        self._last_input = None  # (the input tensor a linear got, the linear whose Gram sum it went into)

    def __enter__(self):
        self._handles = [m.register_forward_hook(self._hook(n)) for n, m in self.linears.items()]
        return self

    def __exit__(self, *exc):
        for h in self._handles:
            h.remove()
        self._handles = []

    @contextlib.contextmanager
    def sequence(self, length: int):
        self._length = length
        yield
        self._offset += length

    def _hook(self, name):
        def fn(_module, args, output):
            x = args[0].detach().reshape(-1, args[0].shape[-1]).float()  # [T, D]
            y = output.detach().reshape(-1, output.shape[-1]).float()  # [T, C]
            a = self._acc[name]
            in_max, out_max = x.abs().amax(0), y.abs().amax(0)
            a["in"] = in_max if a["in"] is None else torch.maximum(a["in"], in_max)
            a["out"] = out_max if a["out"] is None else torch.maximum(a["out"], out_max)
            lo, hi = self._offset, self._offset + self._length
            sel = self.picks[(self.picks >= lo) & (self.picks < hi)] - lo
            if sel.numel():
                a["rows"].append(x[sel].clone())
            if self.gram:
                self._add_gram(name, args[0], x)
        return fn

    def _add_gram(self, name: str, given: torch.Tensor, x: torch.Tensor) -> None:
        """Add the products of x [T, D] (the input tensor `given`, as float32 rows) to the Gram sum of `name`, or, when
        the linear hooked just before got this very tensor (q, k, v; gate, up), note that `name` shares its sum."""
        last = self._last_input
        owner = last[1] if last is not None and last[0] is given else name
        self._last_input = (given, owner)
        a = self._acc[name]
        if a["gram_of"] not in (None, owner):
            raise RuntimeError(f"calibration: {name} got {a['gram_of']}'s input in one sequence and not in another")
        a["gram_of"] = owner
        if owner == name:  # summed in float64 (thousands of tokens' products, some of outlier features), in place:
            product = x.t() @ x  # [D, D] float32, added to the float64 sum without a float64 copy of it
            a["gram"] = a["gram"].add_(product) if torch.is_tensor(a["gram"]) else product.double()
            a["tokens"] += x.shape[0]

    def gram_owners(self) -> dict[str, str]:
        """linear -> the linear whose Gram matrix it shares (itself when it has its own); empty without gram."""
        return {n: a["gram_of"] for n, a in self._acc.items() if a["gram_of"] is not None}

    def stats(self) -> dict[str, LinearStats]:
        owners = self.gram_owners()
        grams = {n: _mean(self._acc[n]["gram"], self._acc[n]["tokens"]) for n in set(owners.values())}
        return {n: LinearStats(a["in"], a["out"], torch.cat(a["rows"]), grams.get(owners.get(n)))
                for n, a in self._acc.items()}


def _mean(total: torch.Tensor, count: int, rows: int = 256) -> torch.Tensor:
    """float32 total / count of a float64 [D, D] sum, a block of rows at a time: the whole float64 quotient would be
    a second copy of the sum (at 1.8B, 242 MB for down_proj's), the peak's largest temporary."""
    out = torch.empty(total.shape, dtype=torch.float32)
    for i in range(0, total.shape[0], rows):
        out[i:i + rows] = total[i:i + rows] / count  # (rounded to float32 as .float() rounds)
    return out


def model_fingerprint(model: nn.Module) -> str:
    """Cheap identity of a model's weights: names, shapes and a strided sample of every parameter's values."""
    h = hashlib.sha1()
    for name, p in model.state_dict().items():
        flat = p.detach().reshape(-1)
        h.update(f"{name}{tuple(p.shape)}".encode())
        h.update(flat[:: max(1, flat.numel() // 1024)].float().numpy().tobytes())
    return h.hexdigest()


def tokens_digest(calibration: list[torch.Tensor]) -> str:
    h = hashlib.sha1()
    for seq in calibration:
        h.update(seq.numpy().tobytes())
        h.update(b"|")
    return h.hexdigest()
