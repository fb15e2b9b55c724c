"""Quality of a quantized model against its FP model on held-out text: mean KL divergence and top-1 agreement.

Both models score the same windows of a token stream (the local corpus's perplexity split, which calibration never
sees). Per window w of T tokens, with p the FP model's and q the quantized model's next-token distributions:
    kl[w]    = mean over the T positions of KL(p || q)      (nats; 0 for an identical model)
    top1[w]  = fraction of the T positions where argmax p == argmax q
The per-window values are returned so that callers can give an interval (windows are independent text, tokens
within a window are not).
"""
from __future__ import annotations

import hashlib
import math

import torch
import torch.nn.functional as F


HELD_OUT = "ppl-local"  # the `dataset` of fidelity rows: the held-out text, shared by every task's figure
PROTOCOL = "{windows} windows x {window} tokens, evenly spaced over the stream; KL(FP || quantized) per position"


def fidelity(fp_model, q_model, token_ids: torch.Tensor, window: int = 512, windows: int = 8,
             reference: str | None = None) -> dict:
    """{kl: [windows], top1: [windows], protocol} of q_model against fp_model (both called as model(ids).logits)."""
    return fidelity_of_each(fp_model, {"q": q_model}, token_ids, window, windows, reference)["q"]


def fidelity_of_each(fp_model, q_models: dict, token_ids: torch.Tensor, window: int = 512,
                     windows: int = 8, reference: str | None = None) -> dict[str, dict]:
    """fidelity() of every model in q_models (name -> model) against fp_model, with the FP model run once per window
    for all of them (the FP pass is as costly as a quantized one). `reference` names the FP model (its checkpoint):
    given, its per-window distributions are kept for the next call over the same model and windows in this process
    (a sweep's fidelity points, one per quantizer or engine, share one FP pass per window); each result says whether
    its FP pass was computed or reused ("reference")."""
    token_ids = torch.as_tensor(token_ids).long()
    if token_ids.dim() != 1:
        raise ValueError(f"token_ids must be 1-D, got shape {tuple(token_ids.shape)}")
    if window < 2 or windows < 1:
        raise ValueError(f"need window >= 2 and windows >= 1, got window={window}, windows={windows}")
    fit = token_ids.numel() // window
    if fit < windows:
        raise ValueError(f"the stream has {token_ids.numel()} tokens: room for {fit} windows of {window}, "
                         f"not {windows}")
    starts = [(i * fit // windows) * window for i in range(windows)]  # spread over the whole stream
    batches = [token_ids[s:s + window][None] for s in starts]
    key = None if reference is None else _ReferenceCache.key_of(reference, batches)
    reused = _REFERENCES.lookup(key)
    computed = _REFERENCES.collector(key, len(batches)) if reused is None else None
    kl = {name: [] for name in q_models}
    top1 = {name: [] for name in q_models}
    with torch.inference_mode():
        for i, ids in enumerate(batches):
            if reused is None:  # log-softmax of the FP logits, [window, V] float32
                p_log = F.log_softmax(fp_model(input_ids=ids).logits[0].float(), -1)
                computed.add(p_log)
            else:
                p_log = reused[i]
            p, p_top = p_log.exp(), p_log.argmax(-1)
            for name, q_model in q_models.items():
                q_log = F.log_softmax(q_model(input_ids=ids).logits[0].float(), -1)
                kl[name].append(float((p * (p_log - q_log)).sum(-1).mean()))
                top1[name].append(float((p_top == q_log.argmax(-1)).float().mean()))
    protocol = PROTOCOL.format(windows=windows, window=window)
    how = "FP pass reused from this process's previous fidelity run" if reused is not None else "FP pass computed"
    return {name: {"kl": kl[name], "top1": top1[name], "protocol": protocol, "reference": how} for name in q_models}


class _ReferenceCache:
    """The last FP model's per-window log-probabilities, keyed by its name and the windows' token ids: one entry, and
    none over `max_bytes` (8 windows of 512 tokens over a 49k vocabulary hold 0.8 GB; a 128k vocabulary's would hold
    2.1 GB and is recomputed instead)."""

    def __init__(self, max_bytes: int = 1 << 30):
        self.max_bytes = max_bytes
        self.key, self.log_probs = None, None

    @staticmethod
    def key_of(reference: str, batches: list[torch.Tensor]) -> tuple[str, str]:
        """(the FP model's name, a digest of the windows' token ids)."""
        digest = hashlib.sha256()
        for ids in batches:
            digest.update(ids.numpy().tobytes())
        return reference, digest.hexdigest()

    def lookup(self, key: tuple[str, str] | None) -> list[torch.Tensor] | None:
        return self.log_probs if key is not None and key == self.key else None

    def collector(self, key: tuple[str, str] | None, windows: int) -> "_Collector":
        """Where a call that computes the FP pass puts each window's log-probabilities: the old entry goes at once,
        the new one is kept when its last window arrives (a call that raises midway leaves none). key None: kept
        nowhere."""
        if key is not None:
            self.key, self.log_probs = None, None  # a new model or new windows: free the old entry first
        return _Collector(self, key, windows)


class _Collector:
    def __init__(self, cache: _ReferenceCache, key, windows: int):
        self.cache, self.key, self.windows, self.kept, self.bytes = cache, key, windows, [], 0

    def add(self, log_probs: torch.Tensor) -> None:
        if self.key is None:
            return
        self.bytes += log_probs.numel() * log_probs.element_size()
        if self.bytes > self.cache.max_bytes:  # too big to keep: stop holding any of it
            self.key, self.kept = None, []
            return
        self.kept.append(log_probs)
        if len(self.kept) == self.windows:
            self.cache.key, self.cache.log_probs = self.key, self.kept


_REFERENCES = _ReferenceCache()


class LogitsModel:
    """What fidelity() calls, model(input_ids=ids).logits, over an engine's logits function (ids [T] -> [T, V]): e.g.
    harness.engine.capi.NativeEngine.logits, the runtime's forward pass over a packed file."""

    def __init__(self, logits):
        self.logits = logits

    def __call__(self, input_ids):
        class Out:
            pass

        out = Out()
        out.logits = self.logits(input_ids[0].tolist())[None]
        return out


