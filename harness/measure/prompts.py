"""Prompt sets for cold TTFT: token-id prompts of an exact length, made from text every machine already has.

TTFT depends on the prompt's length far more than on its words, but a prompt should still be real text in the
model's tokenizer (llama.cpp receives it as text and re-tokenises it). Two sources ship with Python itself, so the
prompts are generated, identical on every machine with the same Python, and need no download:
- `stdlib-docs`: English prose, the docstrings of a fixed list of standard-library modules;
- `stdlib-code`: Python code, the source of the same modules.
Prompt i is `prompt_tokens` tokens taken from the tokenised text at offset i * stride, cut on token boundaries
that survive a decode/encode round trip (so every engine sees the same ids).
"""
from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass

MODULES = ("json", "argparse", "functools", "pathlib", "dataclasses", "statistics", "textwrap", "heapq", "bisect",
           "shutil", "tempfile", "csv")


@dataclass
class PromptsConfig:
    """conf/prompts/*.yaml."""

    name: str = "prose"
    source: str = "stdlib-docs"  # stdlib-docs | stdlib-code
    count: int = 1  # prompts per configuration (each is measured protocol.repetitions times)
    prompt_tokens: int = 128
    stride: int = 997  # tokens between the starts of consecutive prompts

    def __post_init__(self):
        if self.source not in SOURCES:
            raise ValueError(f"prompts.source must be one of {sorted(SOURCES)}, got {self.source!r}")
        if not (1 <= self.count <= 100):
            raise ValueError(f"prompts.count must be an integer in [1, 100], got {self.count}")
        if not (1 <= self.prompt_tokens <= 32768):
            raise ValueError(f"prompts.prompt_tokens must be an integer in [1, 32768], got {self.prompt_tokens}")
        if self.stride < 1:
            raise ValueError(f"prompts.stride must be >= 1, got {self.stride}")


def _docs() -> str:
    parts = []
    for name in MODULES:
        mod = importlib.import_module(name)
        parts.append(inspect.getdoc(mod) or "")
        for _, obj in sorted(vars(mod).items()):
            if (inspect.isfunction(obj) or inspect.isclass(obj)) and getattr(obj, "__module__", None) == name:
                parts.append(inspect.getdoc(obj) or "")
    return "\n\n".join(p for p in parts if p)


def _code() -> str:
    return "\n\n".join(inspect.getsource(importlib.import_module(name)) for name in MODULES)


SOURCES = {"stdlib-docs": _docs, "stdlib-code": _code}


def make_prompts(cfg: PromptsConfig, tokenizer) -> list[list[int]]:
    """`cfg.count` prompts of exactly `cfg.prompt_tokens` ids that decode and re-encode to themselves."""
    ids = tokenizer.encode(SOURCES[cfg.source](), add_special_tokens=False)
    prompts = []
    start = 0
    while len(prompts) < cfg.count:
        if start + cfg.prompt_tokens > len(ids):
            raise ValueError(f"prompts {cfg.name}: the {cfg.source} text has {len(ids)} tokens, too few for "
                             f"{cfg.count} prompts of {cfg.prompt_tokens} tokens with stride {cfg.stride}")
        window = ids[start:start + cfg.prompt_tokens]
        if tokenizer.encode(tokenizer.decode(window), add_special_tokens=False) == window:
            prompts.append(window)
            start += cfg.stride
        else:
            start += 1  # the cut split a multi-token word: move on until the window round-trips
    return prompts
