"""The single-node SLURM cluster fixture (tests/runner/slurm_cluster.py) and its logs in every failure report."""
import sys

import pytest

from tests.runner.slurm_cluster import ClusterError, SlurmCluster, missing_tools


@pytest.fixture(scope="module")
def slurm_cluster():
    """munged, slurmctld and slurmd on localhost from a generated config in a temp folder; stopped and removed after
    the module, even when a test failed. Fails (never skips) when the cluster cannot start, with the reason."""
    cluster = SlurmCluster()
    try:
        try:
            cluster.start()
        except ClusterError as e:
            if missing_tools():
                raise
            print(f"SLURM test cluster: first start failed, trying once more on fresh ports:\n{e}", file=sys.stderr)
            # once more, on fresh ports: another process may have taken one between our probe and the daemon's bind
            cluster.cleanup()
            cluster = SlurmCluster()
            cluster.start()
        yield cluster
    finally:
        cluster.cleanup()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    cluster = getattr(item, "funcargs", {}).get("slurm_cluster")
    if report.failed and cluster is not None:
        try:
            jobs = "\n".join(f"{j['id']} {j['state']} {j['name']}" for j in cluster.jobs())
        except Exception as e:  # the controller may be what failed
            jobs = f"(squeue failed: {e})"
        report.sections.append(("SLURM test cluster", f"folder {cluster.root}\njobs:\n{jobs}\n"
                                f"accounting:\n{cluster.accounting()}\n{cluster.logs()}"))
