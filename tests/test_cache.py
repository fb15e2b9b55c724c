"""harness.cache.atomic_directory: a writer never leaves a half directory, and a cache entry built by two processes
at once is never replaced under a reader (keep_existing); exclusive: processes building one entry take turns."""
import subprocess
import sys

import pytest

from harness.cache import atomic_directory, atomic_file, exclusive

# A step that writes "begin", sleeps and writes "end" to a shared log, under the lock.
STEP = """
import sys, time
from pathlib import Path
from harness.cache import exclusive
with exclusive(Path(sys.argv[1])):
    with open(sys.argv[2], "a") as log:
        log.write("begin\\n"); log.flush(); time.sleep(0.3); log.write("end\\n")
"""


def test_processes_holding_one_lock_take_turns(tmp_path):
    lock, log = tmp_path / "entry.lock", tmp_path / "log"
    steps = [subprocess.Popen([sys.executable, "-c", STEP, str(lock), str(log)]) for _ in range(3)]
    assert [s.wait(timeout=60) for s in steps] == [0, 0, 0]
    assert log.read_text().split() == ["begin", "end"] * 3  # never begin, begin


def test_two_locks_nest_in_one_process(tmp_path):
    with exclusive(tmp_path / "source.lock"), exclusive(tmp_path / "build.lock"):
        pass


def test_atomic_file_names_a_fresh_temporary_per_writer(tmp_path):
    out = tmp_path / "model.gguf"
    with atomic_file(out) as first, atomic_file(out) as second:  # two writers at once never share a file
        assert first != second and first.parent == second.parent == tmp_path
        first.write_text("first")
        second.write_text("second")
    assert out.read_text() == "first" and sorted(tmp_path.iterdir()) == [out]


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
