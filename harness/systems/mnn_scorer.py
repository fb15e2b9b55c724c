"""MNN's own forward pass as a scorer (harness/eval/scorer_lm.py): token ids -> log-probabilities, computed by `MNN.llm`
over the export that MNN's TTFT loads.

    with MNNScorer.open(config_json, threads=2) as scorer:
        rows = scorer.logprobs(ids, last=3)     # float32 [3, V]
        rows = scorer.logprobs_after(prefix, tails)   # continuations sharing a prefix, the prefix prefilled once

Each request starts from an empty KV cache (`Llm.reset()`), and MNN's `all_logits` option makes `Llm.forward(ids)`
return the logits of every position, [1, T, V], in one prefill (in mnn 3.6.1 these rows equal a prefix's own prefill
and the rows of a forward continued from that prefix, bit for bit). Continuations sharing a prefix (a multiple-choice
item's endings) continue its KV cache one after another, each erased again (`erase_history`, which mnn 3.6.1's
binding has but its `MNN.llm.Llm` wrapper does not pass on) before the next: the same bits as scoring each from
scratch (tests/systems/test_scorers.py). Runs in this process: MNN.llm is a Python API.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from harness.measure.cold import EngineError


class MNNScorer:
    def __init__(self, llm):
        self.llm = llm

    @classmethod
    def open(cls, config: str | Path, threads: int) -> "MNNScorer":
        import MNN.llm as mnn_llm

        if not Path(config).is_file():
            raise FileNotFoundError(f"MNN scorer: no exported model config at {config}")
        llm = mnn_llm.create(str(config))
        llm.set_config({"thread_num": int(threads), "all_logits": True})
        llm.load()
        return cls(llm)

    def logits(self, ids: list[int]) -> torch.Tensor:
        """float32 [T, V] log-probabilities of every position (what fidelity's LogitsModel calls)."""
        return self.logprobs(ids, len(ids))

    def logprobs(self, ids: list[int], last: int) -> torch.Tensor:
        """float32 [last, V]: row j is MNN's log-distribution of the token after position len(ids) - last + j."""
        n = len(ids)
        if not 1 <= last <= n:
            raise ValueError(f"need 1 <= last <= len(ids), got last={last}, len(ids)={n}")
        self.llm.reset()
        return torch.log_softmax(self._forward(ids)[-last:], dim=-1)

    def logprobs_after(self, prefix: list[int], tails: list[list[int]]) -> list[torch.Tensor]:
        """float32 [1 + len(tail), V] per tail: after the prefix's last token, then after each tail token
        (harness/eval/scorer_lm.py's shared-prefix interface). The prefix is prefilled once; each tail continues its
        KV cache and is erased from it again."""
        first = self.logprobs(prefix, 1)
        out = []
        for tail in tails:
            if not tail:
                out.append(first)
                continue
            rows = torch.log_softmax(self._forward(tail), dim=-1)
            self._rewind(len(prefix))
            out.append(torch.cat([first, rows]))
        return out

    def _forward(self, ids: list[int]) -> torch.Tensor:
        """float32 [len(ids), V] logits of `ids` continuing the KV cache as it is."""
        out = self.llm.forward([int(t) for t in ids])
        if out is None:
            raise EngineError(f"MNN.llm returned no logits for a {len(ids)}-token request")
        logits = np.asarray(out.read(), dtype=np.float32)
        rows = logits.reshape(-1, logits.shape[-1])
        if rows.shape[0] != len(ids):
            raise EngineError(f"MNN.llm returned {rows.shape[0]} rows of logits for {len(ids)} tokens (all_logits "
                              "not honoured by this MNN version)")
        return torch.from_numpy(rows.copy())

    def _rewind(self, keep: int) -> None:
        """Keep the first `keep` positions of the KV cache (erase_history drops the rest, and their positions, at the
        next forward)."""
        self.llm._c_obj.erase_history(keep, 0)  # mnn 3.6.1: the binding's LLM object has it, the wrapper does not

    def close(self) -> None:
        self.llm = None

    def __enter__(self) -> "MNNScorer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
