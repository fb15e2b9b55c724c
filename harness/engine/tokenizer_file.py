"""The tokenizer file beside a packed model (`MODEL.efpk.tok`): what `edgeflow-run --prompt-text` needs to go from the
prompt's text to token ids as llama.cpp and MNN do (edgeflow_runtime/src/engine/tokenizer.h has the byte layout).

    write_tokenizer_file(checkpoint_dir / "tokenizer.json", packed.with_name(packed.name + ".tok"))

Only byte-level BPE tokenizers with the GPT-2 pre-tokenizer and no normalizer are supported (SmolLM2, GPT-2 and the
Llama-3/Qwen families' byte-level vocabularies); any other raises UnsupportedTokenizer naming what differs. The
Unicode classes the pre-tokenizer needs (letters, numbers, white space above ASCII) are written from Python's
unicodedata, so the engine needs no Unicode tables of its own.
"""
from __future__ import annotations

import json
import os
import struct
import sys
import unicodedata
from pathlib import Path

from harness.cache import atomic_file

MAGIC, VERSION = b"EFTK", 1
LETTER, NUMBER, SPACE = 1, 2, 3
# Unicode White_Space above ASCII (what the tokenizers library's regex means by \s; str.isspace also has U+001C-1F).
WHITE_SPACE = {0x85, 0xA0, 0x1680, *range(0x2000, 0x200B), 0x2028, 0x2029, 0x202F, 0x205F, 0x3000}


class UnsupportedTokenizer(ValueError):
    """The tokenizer is not byte-level BPE with the GPT-2 pre-tokenizer: the engine cannot reproduce it."""


def _check(spec: dict, path: Path) -> None:
    model, pre = spec.get("model") or {}, spec.get("pre_tokenizer") or {}
    problems = []
    if model.get("type") != "BPE":
        problems.append(f"model type {model.get('type')!r}, not BPE")
    if spec.get("normalizer") is not None:
        problems.append("it has a normalizer")
    if pre.get("type") != "ByteLevel" or not pre.get("use_regex", True) or pre.get("add_prefix_space"):
        problems.append(f"pre-tokenizer {json.dumps(pre)[:120]}, not ByteLevel with the GPT-2 pattern and no prefix "
                        "space")
    if model.get("byte_fallback") or model.get("ignore_merges"):
        problems.append("byte_fallback / ignore_merges are set")
    if problems:
        raise UnsupportedTokenizer(f"{path}: the engine's tokenizer cannot reproduce it: {'; '.join(problems)}")


def class_ranges() -> list[tuple[int, int, int]]:
    """(first, last, class) runs of code points >= 128 that are letters (L*), numbers (N*) or white space."""
    ranges: list[list[int]] = []
    for cp in range(128, sys.maxunicode + 1):
        cat = unicodedata.category(chr(cp))
        cls = SPACE if cp in WHITE_SPACE else LETTER if cat[0] == "L" else NUMBER if cat[0] == "N" else 0
        if not cls:
            continue
        if ranges and ranges[-1][2] == cls and ranges[-1][1] == cp - 1:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp, cls])
    return [tuple(r) for r in ranges]


def write_tokenizer_file(tokenizer_json: str | os.PathLike, out: str | os.PathLike) -> Path:
    """Write the engine's tokenizer file for a Hugging Face tokenizer.json (atomically); returns `out`."""
    path, out = Path(tokenizer_json), Path(out)
    if not path.is_file():
        raise FileNotFoundError(f"no tokenizer.json at {path}: the engine's tokenizer file is made from it")
    spec = json.loads(path.read_text(encoding="utf-8"))
    _check(spec, path)
    from transformers.convert_slow_tokenizer import bytes_to_unicode  # GPT-2's byte <-> printable character map

    decode = {c: b for b, c in bytes_to_unicode().items()}
    vocab: dict[str, int] = dict(spec["model"]["vocab"])
    added = {t["content"]: t["id"] for t in spec.get("added_tokens", [])}
    n_vocab = max([*vocab.values(), *added.values()]) + 1
    tokens = [b""] * n_vocab
    for text, i in vocab.items():
        tokens[i] = bytes(decode[c] for c in text)
    for text, i in added.items():  # added tokens are plain text, matched literally
        tokens[i] = text.encode("utf-8")
    merges = []
    for m in spec["model"]["merges"]:
        left, right = m.split(" ", 1) if isinstance(m, str) else m
        merges.append((vocab[left], vocab[right], vocab[left + right]))
    ranges = class_ranges()
    parts = [MAGIC, struct.pack("<II", VERSION, n_vocab)]
    parts += [struct.pack("<H", len(t)) + t for t in tokens]
    parts += [struct.pack("<I", len(merges)), b"".join(struct.pack("<III", *m) for m in merges)]
    parts += [struct.pack("<I", len(ranges)), b"".join(struct.pack("<IIB", *r) for r in ranges)]
    parts += [struct.pack("<I", len(added)), b"".join(struct.pack("<I", i) for i in sorted(added.values()))]
    with atomic_file(out) as partial:
        partial.write_bytes(b"".join(parts))
    return out


def tokenizer_file_of(packed: str | os.PathLike) -> Path:
    """Where edgeflow-run looks for a packed model's tokenizer by default."""
    packed = Path(packed)
    return packed.with_name(packed.name + ".tok")
