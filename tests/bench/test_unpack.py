"""The benchmark binary's modes on a tiny packed file: counts and timelines are consistent (no timing asserted)."""
import pytest

from harness.pack import PackedFile, pack_artifact
from harness.bench.unpack import run_bench
from tests.pack.conftest import tiny_artifact  # noqa: F401  (the fixture)

pytestmark = pytest.mark.native


@pytest.fixture(scope="module")
def packed(tiny_artifact, tmp_path_factory):
    return pack_artifact(tiny_artifact, tmp_path_factory.mktemp("bench") / "w.efpk")


def test_unpack_counts_every_quantized_weight(packed, tiny_artifact):
    weights = sum(q.codes.numel() for q in tiny_artifact.linears.values())
    res = run_bench(packed, "unpack", path="scalar", reps=2)
    assert res["weights"] == weights and len(res["seconds"]) == 2 and res["path"] == "scalar"
    assert run_bench(packed, "once", layers=1)["weights"] == weights // 2  # two identical layers


def test_cold_and_e2e_read_every_layer_after_eviction(packed):
    layers = [r for r in PackedFile(packed).regions if r.kind == 1]
    cold = run_bench(packed, "cold", load_threads=2)
    assert cold["bytes_read"] == sum(r.size for r in layers)
    assert cold["resident_before"] == 0.0  # fdatasync + POSIX_FADV_DONTNEED left nothing of the file cached
    e2e = run_bench(packed, "e2e", load_threads=2)
    assert len(e2e["unpack_start"]) == len(layers)
    for i in range(len(layers)):  # a layer is unpacked only after it was loaded, layers in order
        assert e2e["load_start"][i] <= e2e["load_end"][i] <= e2e["unpack_start"][i] <= e2e["unpack_end"][i]
        assert i == 0 or e2e["unpack_start"][i] >= e2e["unpack_end"][i - 1]
