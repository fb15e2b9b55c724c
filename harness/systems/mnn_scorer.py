"""MNN's own forward pass as a scorer (harness/eval/scorer_lm.py): token ids -> log-probabilities, computed by `MNN.llm`
over the export that MNN's TTFT loads.

    with MNNScorer.open(config_json, threads=2) as scorer:
        rows = scorer.logprobs(ids, last=3)     # float32 [3, V]

Each request starts from an empty KV cache (`Llm.reset()`), and MNN's `all_logits` option makes `Llm.forward(ids)`
return the logits of every position, [1, T, V], in one prefill (in mnn 3.6.1 these rows equal a prefix's own prefill
and the rows of a forward continued from that prefix, bit for bit). Runs in this process: MNN.llm is a Python API.
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
        out = self.llm.forward([int(t) for t in ids])
        if out is None:
            raise EngineError(f"MNN.llm returned no logits for a {n}-token request")
        logits = np.asarray(out.read(), dtype=np.float32)
        rows = logits.reshape(-1, logits.shape[-1])
        if rows.shape[0] != n:
            raise EngineError(f"MNN.llm returned {rows.shape[0]} rows of logits for {n} tokens (all_logits not "
                              "honoured by this MNN version)")
        return torch.log_softmax(torch.from_numpy(rows[-last:].copy()), dim=-1)

    def close(self) -> None:
        self.llm = None

    def __enter__(self) -> "MNNScorer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
