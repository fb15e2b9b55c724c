"""bench-paper-shape's I/O floor line: bytes read per run over the emulated rate, and each run's TTFT over it
(synthetic entries, no timing asserted)."""
from types import SimpleNamespace

from harness.bench.paper_shape import io_floor_line


class Entry(SimpleNamespace):
    def values(self, metric):
        return self.runs.get(metric, [])


def test_the_floor_is_the_bytes_each_run_read_at_the_emulated_rate():
    e = Entry(runs={"ttft_s": [4.4, 4.2, 4.6], "bytes_read_mb": [800.0, 800.0, 800.0]})
    assert io_floor_line(e, 200) == ("read 800 MB per run; I/O floor 4.00 s at 200 MB/s; TTFT / floor 1.10 "
                                     "(1.05..1.15)")


def test_a_device_that_cannot_count_bytes_says_so():
    assert io_floor_line(Entry(runs={"ttft_s": [1.0]}), 200) == "bytes read: not known on this device"
