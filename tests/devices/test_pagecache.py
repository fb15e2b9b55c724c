import os

import pytest

from harness.devices import pagecache


def test_evict_drops_a_cached_file_and_residency_sees_it(tmp_path):
    f = tmp_path / "weights.bin"
    f.write_bytes(os.urandom(3 * pagecache.PAGE + 17))  # 4 pages, the last one partial
    f.read_bytes()  # now cached
    assert pagecache.resident_pages(f) == (4, 4)
    assert pagecache.evict([f]) == 0.0
    assert pagecache.resident_fraction([f]) == 0.0


def test_preload_caches_exactly_the_requested_prefix(tmp_path):
    f = tmp_path / "weights.bin"
    f.write_bytes(os.urandom(64 * pagecache.PAGE))
    pagecache.evict([f])
    assert pagecache.preload([f], 0.25) == pytest.approx(0.25)  # no readahead past the prefix
    assert pagecache.preload([f], 1.0) == 1.0


def test_directories_expand_to_their_files_and_missing_paths_are_errors(tmp_path):
    (tmp_path / "a").write_bytes(b"x" * 100)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b").write_bytes(b"y" * 100)
    assert [p.name for p in pagecache.expand_files([tmp_path])] == ["a", "b"]
    with pytest.raises(FileNotFoundError, match="no-such-file"):
        pagecache.expand_files([tmp_path / "no-such-file"])


def test_empty_file_has_no_pages(tmp_path):
    f = tmp_path / "empty"
    f.write_bytes(b"")
    assert pagecache.resident_pages(f) == (0, 0)
    assert pagecache.resident_fraction([f]) == 0.0
