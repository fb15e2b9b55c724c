"""Perplexity with the GPTQ/AWQ WikiText-2 protocol.

The caller joins the test split's texts with "\\n\\n" and tokenizes the result once into `token_ids` (the data
module does this for WikiText-2 and for the local corpora). Here the stream is cut into non-overlapping windows of
`window` tokens (the remainder is dropped); each window is scored on its own (no context carried over), and
    nll = mean over windows of (mean NLL of the window's window-1 next-token predictions)
    ppl = exp(nll)
which is exactly what GPTQ's and AWQ's evaluation loops compute (they multiply each window's mean loss by the
window length and divide the sum by windows * window).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

PROTOCOL = "gptq-wikitext2: non-overlapping {window}-token windows, remainder dropped, exp(mean of window mean NLL)"


def perplexity(model, token_ids: torch.LongTensor, window: int = 2048, max_windows: int | None = None) -> dict:
    """{ppl, nll, tokens, windows, protocol} of a causal LM (called as model(input_ids).logits) on a token stream."""
    windows = window_count(model, token_ids, window, max_windows)
    nlls = [window_nll(model, token_ids, window, i)
            for i in tqdm(range(windows), desc="perplexity", unit="window", leave=False)]
    return summary(nlls, window)


def summary(nlls: list[float], window: int) -> dict:
    nll = sum(nlls) / len(nlls)
    return {"ppl": math.exp(nll), "nll": nll, "tokens": len(nlls) * window, "windows": len(nlls),
            "protocol": PROTOCOL.format(window=window)}


def window_count(model, token_ids: torch.LongTensor, window: int, max_windows: int | None) -> int:
    """How many windows the stream holds (at most max_windows), after checking every argument."""
    token_ids = torch.as_tensor(token_ids)
    if token_ids.dim() != 1 or token_ids.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"token_ids must be a 1-D integer tensor, got dtype {token_ids.dtype} shape "
                         f"{tuple(token_ids.shape)}")
    if not isinstance(window, int) or window < 2:
        raise ValueError(f"window must be an integer >= 2, got {window!r}")
    if max_windows is not None and (not isinstance(max_windows, int) or max_windows < 1):
        raise ValueError(f"max_windows must be None or an integer >= 1, got {max_windows!r}")
    windows = token_ids.numel() // window
    if windows == 0:
        raise ValueError(f"the token stream has {token_ids.numel()} tokens, fewer than one window of {window}")
    vocab = _vocab_size(model)
    if vocab is not None and (int(token_ids.min()) < 0 or int(token_ids.max()) >= vocab):
        raise ValueError(f"token_ids hold ids outside the model's vocabulary [0, {vocab})")
    return windows if max_windows is None else min(windows, max_windows)


def window_nll(model, token_ids: torch.LongTensor, window: int, index: int) -> float:
    """Mean NLL of window `index`'s window-1 next-token predictions."""
    ids = torch.as_tensor(token_ids)[index * window:(index + 1) * window].long()[None]
    model.eval()
    with torch.inference_mode():
        logits = model(input_ids=ids).logits[0, :-1].float()  # [window-1, V]
    return float(F.cross_entropy(logits, ids[0, 1:], reduction="mean"))


def _vocab_size(model) -> int | None:
    config = getattr(model, "config", None)
    return getattr(config, "vocab_size", None)
