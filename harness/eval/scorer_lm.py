"""lm-eval over any engine that can score a token sequence: the engine computes the numbers, lm-eval the task.

    lm = ScoredLM(engine.logprobs, tokenizer, reference=torch_logprobs(fakequant_model),
                  shared=engine.logprobs_after, reference_shared=torch_logprobs_after(fakequant_model))
    lm_eval.simple_evaluate(model=lm, ...)      # loglikelihood tasks (LAMBADA, HellaSwag, MMLU, ...)
    lm.agreement()                              # engine vs reference on every scored token

A scorer maps token ids (list[int], length T) and a count `last` to float32 log-probabilities [last, V]: row j is the
distribution of the token after position T - last + j (engines that score one position at a time need not compute
the context's rows). Tokenization and the context/continuation split are lm-eval's own (TemplateLM, as HFLM does),
so the same requests reach every engine. With a `reference` scorer (the fake-quant torch model) each request is also
scored by it, and the two are compared: top-1 agreement on the scored tokens and |difference| of the requests'
log-likelihoods; `reference_groups` bounds the check to the first N contexts (items), since the float reference
costs more than the engine it checks.

Multiple-choice tasks send one request per answer, all with the same context (HellaSwag: 4 endings after a context
of ~100-900 tokens). A shared scorer maps (prefix, tails) to one [1 + len(tail), V] tensor per tail: the distribution
after the prefix's last token, then after each tail token. Engines that keep a KV cache run the prefix once
(NativeEngine, LlamaCppScorer and MNNScorer.logprobs_after); the rows are the ones scoring each request from scratch
gives (tests/eval/test_scorer_lm.py). Without one, requests are scored one by one. `stats` counts both.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
from lm_eval.api.model import TemplateLM

Scorer = Callable[[list[int], int], torch.Tensor]  # (ids [T], last) -> log-probabilities [last, V]
# (prefix [P], tails) -> per tail, log-probabilities [1 + len(tail), V] after positions P - 1 .. P - 1 + len(tail)
SharedScorer = Callable[[list[int], list[list[int]]], list[torch.Tensor]]


def torch_logprobs(model) -> Scorer:
    """A Hugging Face causal LM (FP16 or fake-quant) as a scorer."""
    def score(ids: list[int], last: int) -> torch.Tensor:
        with torch.no_grad():
            # the LM head on the scored rows only (a request needs its continuation's, not the context's)
            logits = model(torch.tensor([ids], device=model.device), logits_to_keep=last).logits[0, -last:]
        return torch.log_softmax(logits.float(), dim=-1).cpu()
    return score


def torch_logprobs_after(model) -> SharedScorer:
    """The same model as a shared scorer: the prefix once, then every tail in one batch over copies of its KV cache.
    Tails are right-padded: under the causal mask no real token attends to the padding after it. Float attention over
    a cache, batched, sums in another order than over the whole sequence: equal to scoring from scratch within float
    rounding (about 1e-6 in a log-probability), not bit for bit."""
    def score(prefix: list[int], tails: list[list[int]]) -> list[torch.Tensor]:
        with torch.no_grad():
            out = model(torch.tensor([prefix], device=model.device), use_cache=True, logits_to_keep=1)
            first = torch.log_softmax(out.logits[0, -1:].float(), dim=-1).cpu()
            longest = max(map(len, tails))
            if longest == 0:
                return [first for _ in tails]
            for layer in out.cache.layers:  # [1, heads, P, d] -> [n, heads, P, d]
                layer.batch_repeat_interleave(len(tails))
            batch = torch.tensor([t + [0] * (longest - len(t)) for t in tails], device=model.device)
            logits = model(batch, cache=out.cache, use_cache=True).logits.float()  # [n, longest, V]
            rest = torch.log_softmax(logits, dim=-1).cpu()
        return [torch.cat([first, rest[i, :len(t)]]) for i, t in enumerate(tails)]
    return score


@dataclass
class ScoringStats:
    """How the requests were scored: `shared` requests came from a group whose context ran once (`groups` of them),
    `alone` ones from scratch; `context_tokens_saved` = context tokens the engine did not run again."""
    shared: int = 0
    alone: int = 0
    groups: int = 0
    context_tokens_saved: int = 0


class ScoredLM(TemplateLM):
    def __init__(self, scorer: Scorer, tokenizer, max_length: int, reference: Scorer | None = None, *,
                 shared: SharedScorer | None = None, reference_shared: SharedScorer | None = None,
                 reference_groups: int | None = None):
        super().__init__()
        self.scorer, self.reference, self.tokenizer, self.max_length = scorer, reference, tokenizer, max_length
        self.shared, self.reference_shared = shared, reference_shared
        self.reference_groups = reference_groups  # contexts the reference also scores: the first N; None = all
        self.checked_groups = 0
        self.top1_same = self.top1_total = 0  # scored tokens whose argmax agrees with the reference's
        self.loglik_diffs: list[float] = []  # |engine - reference| log-likelihood per request
        self.stats = ScoringStats()

    @property
    def eot_token_id(self) -> int:
        return self.tokenizer.eos_token_id

    def tok_encode(self, string: str, add_special_tokens: bool | None = None, **kwargs) -> list[int]:
        return self.tokenizer.encode(string, add_special_tokens=bool(add_special_tokens))

    def _loglikelihood_tokens(self, requests, disable_tqdm: bool = False, **kwargs) -> list[tuple[float, bool]]:
        """Requests grouped by context (in their order), each group scored by _score_group."""
        groups: dict[tuple[int, ...], list[int]] = {}
        for i, (_, context, _) in enumerate(requests):
            groups.setdefault(tuple(context), []).append(i)
        out: list[tuple[float, bool]] = [(0.0, False)] * len(requests)
        for context, members in groups.items():
            check = self.reference is not None and (self.reference_groups is None
                                                    or self.checked_groups < self.reference_groups)
            self.checked_groups += check
            scored = self._score_group(list(context), [list(requests[i][2]) for i in members], check)
            for i, result in zip(members, scored):
                out[i] = result
        return out

    def _score_group(self, context: list[int], continuations: list[list[int]],
                     check: bool) -> list[tuple[float, bool]]:
        # Each request's engine input is context + continuation minus its last token, cut to max_length from the
        # left; the last len(continuation) rows predict the continuation. When no request of the group is cut, the
        # context is a common prefix and a shared scorer runs it once.
        fits = all(len(context) + len(c) <= self.max_length + 1 for c in continuations)
        if self.shared is None or len(continuations) < 2 or not fits:
            self.stats.alone += len(continuations)
            return [self._score(context, c, check) for c in continuations]
        self.stats.shared += len(continuations)
        self.stats.groups += 1
        self.stats.context_tokens_saved += (len(continuations) - 1) * len(context)
        tails = [c[:-1] for c in continuations]
        rows = self.shared(context, tails)
        if not check:
            refs = [None] * len(tails)
        elif self.reference_shared is not None:
            refs = self.reference_shared(context, tails)
        else:
            refs = [self.reference(context + t, len(t) + 1) for t in tails]
        return [self._judge(r, torch.tensor(c), ref) for r, c, ref in zip(rows, continuations, refs)]

    def _score(self, context: list[int], continuation: list[int], check: bool) -> tuple[float, bool]:
        ids = (context + continuation)[-(self.max_length + 1):]
        n = len(continuation)
        ref = self.reference(ids[:-1], n) if check else None
        return self._judge(self.scorer(ids[:-1], n), torch.tensor(ids[-n:]), ref)

    def _judge(self, rows: torch.Tensor, target: torch.Tensor, ref: torch.Tensor | None) -> tuple[float, bool]:
        """(log-likelihood, greedy) of the continuation `target` [n] under rows [n, V]; agreement with ref [n, V]."""
        loglik = float(rows.gather(1, target[:, None]).sum())
        greedy = bool((rows.argmax(-1) == target).all())
        if ref is not None:
            self.top1_same += int((rows.argmax(-1) == ref.argmax(-1)).sum())
            self.top1_total += len(target)
            self.loglik_diffs.append(abs(loglik - float(ref.gather(1, target[:, None]).sum())))
        return loglik, greedy

    def agreement(self) -> dict[str, float]:
        """Engine vs reference over everything scored so far (empty without a reference)."""
        if not self.loglik_diffs:
            return {}
        d = np.array(self.loglik_diffs)
        return {"agreement_top1": self.top1_same / self.top1_total, "agreement_max_abs_loglik": float(d.max()),
                "agreement_mean_abs_loglik": float(d.mean())}

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False):
        raise NotImplementedError("ScoredLM scores continuations only; perplexity runs through harness.eval.perplexity")

    def generate_until(self, requests, disable_tqdm: bool = False):
        raise NotImplementedError("ScoredLM does not generate: generation tasks are not part of the paper's datasets")
