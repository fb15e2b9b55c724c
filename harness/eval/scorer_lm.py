"""lm-eval over any engine that can score a token sequence: the engine computes the numbers, lm-eval the task.

    lm = ScoredLM(engine.logprobs, tokenizer, reference=torch_logprobs(fakequant_model))
    lm_eval.simple_evaluate(model=lm, ...)      # loglikelihood tasks (LAMBADA, HellaSwag, MMLU, ...)
    lm.agreement()                              # engine vs reference on every scored token

A scorer maps token ids (list[int], length T) and a count `last` to float32 log-probabilities [last, V]: row j is the
distribution of the token after position T - last + j (engines that score one position at a time need not compute
the context's rows). Tokenization and the context/continuation split are lm-eval's own (TemplateLM, as HFLM does),
so the same requests reach every engine. With a `reference` scorer (the fake-quant torch model) each request is also
scored by it, and the two are compared: top-1 agreement on the scored tokens and |difference| of the requests'
log-likelihoods.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import torch
from lm_eval.api.model import TemplateLM

Scorer = Callable[[list[int], int], torch.Tensor]  # (ids [T], last) -> log-probabilities [last, V]


def torch_logprobs(model) -> Scorer:
    """A Hugging Face causal LM (FP16 or fake-quant) as a scorer."""
    def score(ids: list[int], last: int) -> torch.Tensor:
        with torch.no_grad():
            logits = model(torch.tensor([ids], device=model.device)).logits[0, -last:]
        return torch.log_softmax(logits.float(), dim=-1).cpu()
    return score


class ScoredLM(TemplateLM):
    def __init__(self, scorer: Scorer, tokenizer, max_length: int, reference: Scorer | None = None):
        super().__init__()
        self.scorer, self.reference, self.tokenizer, self.max_length = scorer, reference, tokenizer, max_length
        self.top1_same = self.top1_total = 0  # scored tokens whose argmax agrees with the reference's
        self.loglik_diffs: list[float] = []  # |engine - reference| log-likelihood per request

    @property
    def eot_token_id(self) -> int:
        return self.tokenizer.eos_token_id

    def tok_encode(self, string: str, add_special_tokens: bool | None = None, **kwargs) -> list[int]:
        return self.tokenizer.encode(string, add_special_tokens=bool(add_special_tokens))

    def _loglikelihood_tokens(self, requests, disable_tqdm: bool = False, **kwargs) -> list[tuple[float, bool]]:
        return [self._score(context, continuation) for _, context, continuation in requests]

    def _score(self, context: list[int], continuation: list[int]) -> tuple[float, bool]:
        # The engine sees context + continuation minus its last token, cut to max_length from the left; the last
        # len(continuation) rows predict the continuation.
        ids = (context + continuation)[-(self.max_length + 1):]
        n = len(continuation)
        target = torch.tensor(ids[-n:])
        rows = self.scorer(ids[:-1], n)
        loglik = float(rows.gather(1, target[:, None]).sum())
        greedy = bool((rows.argmax(-1) == target).all())
        if self.reference is not None:
            ref = self.reference(ids[:-1], n)
            self.top1_same += int((rows.argmax(-1) == ref.argmax(-1)).sum())
            self.top1_total += n
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
