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


def test_the_breakdown_is_each_engines_own_phases_and_names_no_engine():
    """bench-runtime and bench-paper-shape print a cold start's phases as the system defines them (ttft_phases):
    medians over the repetitions, in the system's order; an engine without phases says so."""
    from harness.bench.runtime import breakdown
    from harness.systems.base import Measurement, Metric
    from harness.systems.llamacpp import LlamaCppSystem
    from harness.systems.mnn import MNNSystem

    reps = [[Metric("ttft_s", t, "s"), Metric("llamacpp_load_s", load, "s"), Metric("llamacpp_prompt_eval_s", 0.2, "s")]
            for t, load in ((1.0, 0.5), (1.2, 0.6), (3.0, 0.7))]
    llama = SimpleNamespace(system=LlamaCppSystem, measurements=[Measurement("llamacpp", reps)])
    assert breakdown(llama) == "phases (s): load 0.600, setup 0.400, prefill 0.200"
    mnn = SimpleNamespace(system=MNNSystem, measurements=[Measurement("mnn", [[Metric("ttft_s", 1.0, "s")]])])
    assert breakdown(mnn) == "phases: not reported by this engine"
