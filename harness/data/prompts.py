"""TTFT prompt sets: for a tokenizer and a dataset, N seeded prompts whose token counts follow the paper's Table 3.

Offline (`source="corpus"`, the default) a prompt is text from the corpus's `tasks` split, starting at a seeded
paragraph and cut at a token boundary to a length drawn uniformly from the dataset's band; fixed-length mode is a band
of one length (e.g. 128 tokens for the engine benchmarks). Token counts are without special tokens (a BOS the model
adds is extra). Each prompt carries its text and its ids, the text's own tokenization, checked to have exactly the
drawn length: engines that take text and engines that take ids see the same prompt.

Online (`source="dataset"`) the prompts would be the real dataset's few-shot prompts as lm-eval builds them; that
needs the Hugging Face hub and is not built yet: it fails with DatasetUnavailable naming the dataset.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from harness.data.config import DatasetConfig
from harness.data.corpus import load_corpus
from harness.data.hub import DatasetUnavailable

CORPUS_PROMPT_LABEL = "corpus text (local, Shakespeare corpus)"
MAX_TRIES_PER_PROMPT = 50


@dataclass(frozen=True)
class Prompt:
    dataset: str
    index: int
    text: str
    ids: tuple[int, ...]  # tokenizer(text, add_special_tokens=False).input_ids: what every engine is given
    source: str  # CORPUS_PROMPT_LABEL, or the lm-eval task the prompt came from

    @property
    def n_tokens(self) -> int:
        return len(self.ids)


def prompt_set(tokenizer, dataset: DatasetConfig, n: int | None = None, seed: int | None = None,
               source: str = "corpus") -> list[Prompt]:
    """`n` (default: dataset.n_prompts) prompts in [prompt_tokens_min, prompt_tokens_max] tokens."""
    if source == "dataset":
        raise DatasetUnavailable(
            f"real {dataset.name} prompts need the dataset from the Hugging Face hub through lm-eval "
            f"({dataset.lm_eval_task or dataset.local_task}, {dataset.shots}-shot); this harness builds only corpus "
            f"prompts so far: use source='corpus' (token lengths in Table 3's band)")
    if source != "corpus":
        raise ValueError(f"prompt source must be 'corpus' or 'dataset', got {source!r}")
    return corpus_prompts(tokenizer, dataset.name, dataset.prompt_tokens_min, dataset.prompt_tokens_max,
                          n or dataset.n_prompts, dataset.seed if seed is None else seed)


def fixed_length_prompts(tokenizer, n_tokens: int, n: int, seed: int = 0) -> list[Prompt]:
    """n corpus prompts of exactly n_tokens tokens each (e.g. the 128-token prompt of the engine benchmarks)."""
    return corpus_prompts(tokenizer, f"fixed-{n_tokens}", n_tokens, n_tokens, n, seed)


def corpus_prompts(tokenizer, name: str, min_tokens: int, max_tokens: int, n: int, seed: int) -> list[Prompt]:
    if not 1 <= min_tokens <= max_tokens or n < 1:
        raise ValueError(f"need 1 <= min_tokens ({min_tokens}) <= max_tokens ({max_tokens}) and n >= 1 (got {n})")
    works = load_corpus().split("tasks")
    rng = random.Random(f"prompts:{name}:{min_tokens}-{max_tokens}:{seed}")
    prompts = []
    for index in range(n):
        length = rng.randint(min_tokens, max_tokens)
        for _ in range(MAX_TRIES_PER_PROMPT):
            work = works[rng.randrange(len(works))]
            cut = _cut(tokenizer, work.paragraphs[rng.randrange(len(work.paragraphs)):], length)
            if cut is not None:
                prompts.append(Prompt(name, index, *cut, CORPUS_PROMPT_LABEL))
                break
        else:
            raise ValueError(f"no corpus prompt of exactly {length} tokens after {MAX_TRIES_PER_PROMPT} tries "
                             f"(is the tokenizer's decode lossless?)")
    return prompts


def _cut(tokenizer, paragraphs: tuple[str, ...], length: int) -> tuple[str, tuple[int, ...]] | None:
    """The first `length` tokens of the paragraphs as (text, ids), or None if too short or it does not round-trip."""
    text, chars = [], 0
    for para in paragraphs:  # ~4 characters a token: take enough text, not the whole work
        text.append(para)
        chars += len(para) + 2
        if chars > 8 * length + 64:
            break
    ids = tokenizer("\n\n".join(text), add_special_tokens=False).input_ids
    if len(ids) < length:
        return None
    cut = tokenizer.decode(ids[:length]).strip()
    cut_ids = tuple(tokenizer(cut, add_special_tokens=False).input_ids)
    if len(cut_ids) != length:
        return None  # the cut fell inside a merge or on whitespace: retokenizing changes the count
    return cut, cut_ids
