"""EdgeFlow's command line takes the workload's ids, context and threads (the same work as the baselines)."""
import pytest

from harness.measure.workload import Workload
from harness.systems import get_system
from harness.systems.base import Prepared


def test_command_is_built_from_the_workload():
    system = get_system({"name": "edgeflow", "threads": 2})
    prepared = Prepared("edgeflow", ["m.efpk"], {"binary": "/b/edgeflow-run", "model": "m.efpk"}, "efpk")
    work = Workload.for_request([5, 6, 7], 2)
    assert system.command(prepared, work) == ["/b/edgeflow-run", "m.efpk", "--tokens", "5,6,7", "--threads", "2",
                                              *system.pipeline.args(2), "--ctx", "256", "--json"]
    decoding = Workload.for_request([5, 6, 7], 2, new_tokens=8)
    assert system.command(prepared, decoding)[-2:] == ["--new-tokens", "7"]
    with pytest.raises(ValueError, match="thread budget"):
        system.check_workload(Workload.for_request([5, 6, 7], 3))
