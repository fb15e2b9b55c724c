"""harness.cache.atomic_directory: a writer never leaves a half directory, and a cache entry built by two processes
at once is never replaced under a reader (keep_existing)."""
import pytest

from harness.cache import atomic_directory


def test_an_interrupted_writer_leaves_nothing(tmp_path):
    out = tmp_path / "entry"
    with pytest.raises(RuntimeError):
        with atomic_directory(out) as tmp:
            (tmp / "half").write_text("x")
            raise RuntimeError("interrupted")
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_replacing_by_default_keeping_the_first_for_cache_entries(tmp_path):
    out = tmp_path / "entry"
    for content in ("first", "second"):
        with atomic_directory(out) as tmp:
            (tmp / "f").write_text(content)
    assert (out / "f").read_text() == "second"
    with atomic_directory(out, keep_existing=True) as tmp:  # another process finished first: its entry stays
        (tmp / "f").write_text("third")
    assert (out / "f").read_text() == "second" and list(tmp_path.iterdir()) == [out]
    fresh = tmp_path / "fresh"
    with atomic_directory(fresh, keep_existing=True) as tmp:
        (tmp / "f").write_text("only")
    assert (fresh / "f").read_text() == "only"
