"""Quality of a quantized model against its FP model on held-out text: mean KL divergence and top-1 agreement.

Both models score the same windows of a token stream (the local corpus's perplexity split, which calibration never
sees). Per window w of T tokens, with p the FP model's and q the quantized model's next-token distributions:
    kl[w]    = mean over the T positions of KL(p || q)      (nats; 0 for an identical model)
    top1[w]  = fraction of the T positions where argmax p == argmax q
The per-window values are returned so that callers can give an interval (windows are independent text, tokens
within a window are not).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

HELD_OUT = "ppl-local"  # the `dataset` of fidelity rows: the held-out text, shared by every task's figure
PROTOCOL = "{windows} windows x {window} tokens, evenly spaced over the stream; KL(FP || quantized) per position"


def fidelity(fp_model, q_model, token_ids: torch.Tensor, window: int = 512, windows: int = 8) -> dict:
    """{kl: [windows], top1: [windows], protocol} of q_model against fp_model (both called as model(ids).logits)."""
    return fidelity_of_each(fp_model, {"q": q_model}, token_ids, window, windows)["q"]


def fidelity_of_each(fp_model, q_models: dict, token_ids: torch.Tensor, window: int = 512,
                     windows: int = 8) -> dict[str, dict]:
    """fidelity() of every model in q_models (name -> model) against fp_model, with the FP model run once per window
    for all of them (the FP pass is as costly as a quantized one)."""
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
    kl = {name: [] for name in q_models}
    top1 = {name: [] for name in q_models}
    with torch.inference_mode():
        for s in starts:
            ids = token_ids[s:s + window][None]
            p_log = F.log_softmax(fp_model(input_ids=ids).logits[0].float(), -1)  # [window, V]
            p, p_top = p_log.exp(), p_log.argmax(-1)
            for name, q_model in q_models.items():
                q_log = F.log_softmax(q_model(input_ids=ids).logits[0].float(), -1)
                kl[name].append(float((p * (p_log - q_log)).sum(-1).mean()))
                top1[name].append(float((p_top == q_log.argmax(-1)).float().mean()))
    protocol = PROTOCOL.format(windows=windows, window=window)
    return {name: {"kl": kl[name], "top1": top1[name], "protocol": protocol} for name in q_models}


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


def mean_ci95(values) -> tuple[float, float]:
    """(mean, half-width of a 95% t-interval) over independent samples; half-width nan for fewer than 2."""
    values = [float(v) for v in values]
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, math.nan
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    return mean, _t975(n - 1) * sd / math.sqrt(n)


def _t975(dof: int) -> float:
    """Student's t 0.975 quantile (table for small dof, normal beyond)."""
    table = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
             12: 2.179, 15: 2.131, 20: 2.086, 30: 2.042}
    if dof > 30:
        return 1.96
    return table[max(k for k in table if k <= dof)]  # the next tabulated dof below: a slightly wider interval
