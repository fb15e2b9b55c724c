"""The one definition of 'the same work' (harness/measure/workload.py) and its check in comparisons
(harness/measure/compare.py): different contexts, thread budgets, timed events or tokens fail."""
import json

import pytest

from harness.measure.compare import Entry, balanced_order, paired_ratios, print_comparison, run_interleaved
from harness.measure.workload import Workload, WorkloadMismatch, check_same, request_ctx
from harness.systems.base import Measurement, Metric, Prepared, System, SystemConfig

IDS = tuple(range(10, 138))  # 128 tokens


def test_request_ctx_is_what_every_engine_can_allocate():
    assert request_ctx(128) == 256 and request_ctx(252) == 256 and request_ctx(253) == 512
    assert request_ctx(960) == 1024 and request_ctx(1) == 256
    with pytest.raises(ValueError):
        request_ctx(0)


def test_bad_workloads_name_the_field():
    with pytest.raises(ValueError, match="workload.ctx=100"):
        Workload(IDS, 100, 2)
    with pytest.raises(ValueError, match="workload.threads"):
        Workload(IDS, 256, 0)
    with pytest.raises(ValueError, match="workload.timed_event"):
        Workload(IDS, 256, 2, timed_event="prefill_done")
    with pytest.raises(ValueError, match="workload.cold"):
        Workload(IDS, 256, 2, cold="warm")
    with pytest.raises(ValueError, match="token_ids"):
        Workload((), 256, 2)


def test_settings_are_recorded_without_the_ids():
    w = Workload.for_request(list(IDS), 2)
    rec = json.loads(w.settings())
    assert rec == {"prompt_tokens": 128, "tokens_sha256_12": w.tokens_digest(), "ctx": 256, "threads": 2,
                   "timed_event": "first_token", "cold": "evicted+verified", "new_tokens": 1}
    assert Workload.for_request(IDS, 2, ctx=2048).ctx == 2048  # one value given to every engine


def test_decoding_requests_size_the_context_for_the_generated_tokens():
    w = Workload.for_request(list(IDS), 2, new_tokens=512)
    assert w.new_tokens == 512 and w.ctx == 768  # 128 + 512 positions, rounded up to 256
    with pytest.raises(ValueError, match="cannot hold"):
        Workload(IDS, 256, 2, new_tokens=512)
    with pytest.raises(ValueError, match="workload.new_tokens"):
        Workload(IDS, 256, 2, new_tokens=0)


@pytest.mark.parametrize("other, field", [
    (Workload(IDS, 8192, 2), "ctx"),
    (Workload(IDS, 256, 1), "threads"),
    (Workload(IDS, 256, 2, timed_event="exit"), "timed_event"),
    (Workload(IDS, 256, 2, new_tokens=8), "new_tokens"),
    (Workload(IDS[:-1] + (7,), 256, 2), "token_ids"),
])
def test_a_comparison_with_different_work_fails(other, field):
    same = Workload(IDS, 256, 2)
    assert check_same({"a": same, "b": Workload(IDS, 256, 2)}) == same
    with pytest.raises(WorkloadMismatch, match=f"{field} differs between a .* and b"):
        check_same({"a": same, "b": other})


class FakeSystem(System):
    """Returns canned measurements; `ran` replaces the work it says it did (an engine that changed the settings)."""

    name = "llamacpp"

    def __init__(self, threads=2, ran=None, ttft=0.5):
        super().__init__(SystemConfig(name="llamacpp", threads=threads))
        self.ran, self.ttft = ran, ttft

    def prepare(self, model, bits, device):
        return Prepared(self.name, [], {}, "fake")

    def run_cold(self, prepared, work, device, protocol):
        self.check_workload(work)
        reps = [[Metric("ttft_s", self.ttft, "s"), Metric("exit_s", self.ttft + 0.01, "s"),
                 Metric("load_avg_1m", 0.5, "load")]]
        return Measurement(self.name, reps, workload=self.ran or work, command=["engine", "-c", str(work.ctx)],
                           engine={"isa": "AVX2", "ctx": work.ctx})


def entries(*systems):
    return [Entry(f"s{i}", s, s.prepare(None, 8, None), None) for i, s in enumerate(systems)]


def test_interleaved_comparison_checks_the_work_each_system_ran(capsys):
    work = Workload(IDS, 256, 2)
    done = run_interleaved(entries(FakeSystem(ttft=0.5), FakeSystem(ttft=0.25)), work, reps=3)
    assert [len(e.measurements) for e in done] == [3, 3]  # the warm-up round is discarded
    print_comparison(done, reference="s0")
    out = capsys.readouterr().out
    assert "ctx 256, 2 threads, timed event first_token" in out and "ISA: AVX2" in out
    assert "ratio to s0: 0.50 (0.50..0.50)x" in out and "command: engine -c 256" in out
    with pytest.raises(WorkloadMismatch, match="ctx differs"):  # an engine that ran a different context
        run_interleaved(entries(FakeSystem(), FakeSystem(ran=Workload(IDS, 8192, 2))), work, reps=1)


def test_a_system_given_another_thread_budget_is_refused_before_any_run():
    with pytest.raises(ValueError, match="thread budget"):
        run_interleaved(entries(FakeSystem(threads=2), FakeSystem(threads=1)), Workload(IDS, 256, 2), reps=1)


def test_paired_ratios_need_paired_runs():
    assert paired_ratios([1.0, 2.0], [2.0, 2.0]) == [0.5, 1.0]
    with pytest.raises(ValueError):
        paired_ratios([1.0], [1.0, 2.0])


def test_figure_rows_of_one_comparison_must_record_the_same_work():
    import pandas as pd

    from harness.measure.workload import check_rows

    a, b = Workload(IDS, 256, 2).settings(), Workload(IDS[:64], 256, 2).settings()  # prompts may differ
    rows = pd.DataFrame({"model": ["m"] * 3, "dataset": ["d"] * 3, "system": ["llamacpp", "edgeflow", "edgeflow"],
                         "workload": [a, a, b]})
    check_rows(rows)
    check_rows(rows.assign(workload=None))  # nothing recorded (synthetic or old rows): nothing to check
    with pytest.raises(WorkloadMismatch, match="not the same work"):
        check_rows(rows.assign(workload=[Workload(IDS, 8192, 2).settings(), a, b]))
    with pytest.raises(WorkloadMismatch, match="no workload record"):
        check_rows(rows.assign(workload=[None, a, b]))
    # a system that states it runs its own prompt (llm.npu's demo) is left out; its rows say so
    check_rows(rows.assign(workload=["not the given workload: the engine runs its own prompt", a, b]))


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_each_entry_follows_each_other_once_over_the_balanced_rounds(n):
    """A run pays for the one before it (compare.py), so over the design's rounds every ordered pair of neighbours
    occurs equally often (once; twice over the 2n rounds of an odd n), and every round runs every entry once."""
    rounds = n if n % 2 == 0 else 2 * n
    orders = [balanced_order(n, r) for r in range(rounds)]
    assert all(sorted(o) == list(range(n)) for o in orders)
    pairs = [(o[k], o[k + 1]) for o in orders for k in range(n - 1)]
    each = sorted((a, b) for a in range(n) for b in range(n) if a != b)
    assert sorted(pairs) == sorted(each * (1 if n % 2 == 0 else 2))


def test_interleaved_rounds_run_in_the_balanced_orders():
    ran = []

    class Recording(FakeSystem):
        def run_cold(self, prepared, work, device, protocol):
            ran.append(self.tag)
            return super().run_cold(prepared, work, device, protocol)

    systems = [Recording() for _ in range(3)]
    for i, s in enumerate(systems):
        s.tag = i
    run_interleaved(entries(*systems), Workload(IDS, 256, 2), reps=2, warmup_rounds=1, first_round=4)
    assert ran == balanced_order(3, 4) + balanced_order(3, 5) + balanced_order(3, 6)
