"""Token streams for perplexity and calibration (the perplexity function itself is harness/eval/perplexity.py).

Both perplexity streams follow the GPTQ/AWQ WikiText-2 recipe up to the windows: the documents joined with "\\n\\n"
and tokenized in one call with the tokenizer's defaults; the perplexity function cuts the stream into
non-overlapping windows. Each stream carries a protocol label that goes with every number computed from it.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

import torch

from harness.data.corpus import load_corpus
from harness.data.hub import load_from_hub
from harness.data.tasks import PROXY_LABEL

WIKITEXT2_PROTOCOL = 'WikiText-2 (wikitext-2-raw-v1) test split, rows joined with "\\n\\n" (GPTQ/AWQ protocol)'
LOCAL_PPL_PROTOCOL = f'{PROXY_LABEL}: perplexity split, works joined with "\\n\\n" (GPTQ/AWQ-style stream)'
PYTHON_DOCS_PROTOCOL = ("out-of-domain English: the Python Language Reference topics shipped with CPython "
                        '(pydoc_data.topics, sorted by topic), joined with "\\n\\n"')


@dataclass(frozen=True)
class TokenStream:
    ids: torch.Tensor  # [n_tokens] int64
    protocol: str


def wikitext2_test_tokens(tokenizer) -> TokenStream:
    """The WikiText-2 raw test split as one token stream; needs the Hugging Face hub (or its local cache)."""
    def load():
        import datasets

        return datasets.load_dataset("wikitext", "wikitext-2-raw-v1", split="test")

    rows = load_from_hub("WikiText-2 (wikitext, wikitext-2-raw-v1, test)", load,
                         "use local_ppl_tokens (the Shakespeare corpus's perplexity split)")
    return TokenStream(_encode(tokenizer, "\n\n".join(rows["text"])), WIKITEXT2_PROTOCOL)


def local_ppl_tokens(tokenizer) -> TokenStream:
    """The corpus's perplexity split (whole works never used for calibration or tasks) as one token stream."""
    return TokenStream(_encode(tokenizer, load_corpus().split_text("perplexity")), LOCAL_PPL_PROTOCOL)


def python_docs_tokens(tokenizer) -> TokenStream:
    """Modern technical English unlike the calibration corpus (Elizabethan verse): the pydoc topics every CPython
    ships, ~465k characters. Static activation ranges calibrated on the corpus clip here where they did not there."""
    import pydoc_data.topics

    topics = pydoc_data.topics.topics
    return TokenStream(_encode(tokenizer, "\n\n".join(topics[k] for k in sorted(topics))), PYTHON_DOCS_PROTOCOL)


def fidelity_tokens(tokenizer, text: str) -> TokenStream:
    """The held-out text a fidelity row names in its dataset column: ppl-local (the corpus's perplexity split) or
    python-docs (out-of-domain English)."""
    streams = {"ppl-local": local_ppl_tokens, "python-docs": python_docs_tokens}
    if text not in streams:
        raise ValueError(f"experiment.extra.fidelity_text must be one of {sorted(streams)}, got {text!r}")
    return streams[text](tokenizer)


def calibration_tokens(tokenizer, n_samples: int = 128, seq_len: int = 512, seed: int = 0) -> torch.Tensor:
    """[n_samples, seq_len] int64: seeded random windows of the corpus's calibration split (GPTQ-style sampling).

    The calibration split shares no work with the perplexity and tasks splits, so calibrating never sees test text.
    """
    ids = _encode(tokenizer, load_corpus().split_text("calibration"))
    if n_samples < 1 or not 1 <= seq_len < len(ids):
        raise ValueError(f"need n_samples >= 1 and 1 <= seq_len < {len(ids)} (the calibration split's length in "
                         f"tokens), got n_samples={n_samples}, seq_len={seq_len}")
    rng = random.Random(f"calibration:{seed}")
    starts = [rng.randrange(len(ids) - seq_len) for _ in range(n_samples)]
    return torch.stack([ids[s:s + seq_len] for s in starts])


def _encode(tokenizer, text: str) -> torch.Tensor:
    return tokenizer(text, return_tensors="pt").input_ids[0]
