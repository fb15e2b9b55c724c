"""The native library through ctypes: bit-exact with the Python packer on every unpack path this CPU has, the same
files accepted and the same corruptions rejected as by the Python reader, and the C++ tests (ctest, host and
aarch64 under qemu) pass."""
import os
import shutil
import subprocess

import numpy as np
import pytest

from harness.engine import format as native
from harness.engine.build import NativeError, build, ctest
from harness.pack import LAYOUTS, PackedFile, PackError, pack_artifact
from harness.pack.synthetic import random_codes
from tests.pack.conftest import tiny_artifact  # noqa: F401  (fixture)
from harness.pack.fuzz_corpus import sealed_but_invalid
from tests.pack.test_container import corruptions

pytestmark = pytest.mark.native


@pytest.fixture(scope="module", autouse=True)
def restore_path():
    yield
    native.set_unpack_path("auto")


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_native_unpack_matches_python_on_every_path(layout):
    rng = np.random.default_rng(11)
    lay = LAYOUTS[layout]
    paths = native.supported_paths()
    assert "scalar" in paths
    for c, d in [(1, 1), (9, 17), (8, 128), (13, 129), (31, 576), (5, 1000)]:
        for trial in range(9):
            bits = np.full(c, trial, np.uint8) if trial else rng.integers(1, 9, c).astype(np.uint8)
            codes = random_codes(bits, d, rng)
            payload = lay.encode(codes, bits)
            for path in paths:
                native.set_unpack_path(path)
                np.testing.assert_array_equal(native.unpack_payload(lay.dtype, c, d, payload), codes,
                                              err_msg=f"{layout} {path} [{c}, {d}]")
            if c > 3:
                np.testing.assert_array_equal(native.unpack_payload(lay.dtype, c, d, payload, 2, 4), codes[2:4])


def test_native_reads_packed_artifact(tiny_artifact, tmp_path):
    path = pack_artifact(tiny_artifact, tmp_path / "m.efpk")
    py = PackedFile(path)
    with native.NativeFile(path) as f:
        assert [t.name.decode() for t in f.tensors()] == [t.name for t in py.tensors]
        for name, q in tiny_artifact.linears.items():
            np.testing.assert_array_equal(f.unpack(f"{name}.weight"), q.codes.numpy())
        assert f.read("model.norm.weight") == py.payload("model.norm.weight")


def test_native_rejects_what_python_rejects(tiny_artifact, tmp_path):
    good = pack_artifact(tiny_artifact, tmp_path / "good.efpk").read_bytes()
    for label, bad, match in corruptions(good):
        path = tmp_path / "bad.efpk"
        path.write_bytes(bad)
        with pytest.raises(NativeError, match=match):
            with native.NativeFile(path) as f:
                for t in f.tensors():
                    name = t.name.decode()
                    f.unpack(name) if t.dtype >= 16 else f.read(name)
        with pytest.raises(PackError):  # and the Python reader agrees
            pf = PackedFile(path)
            for t in pf.tensors:
                pf.quant_codes(t.name[:-7]) if t.dtype >= 16 else pf.array(t.name)
        assert label


def test_both_readers_refuse_a_quantized_lm_head_before_version_4(tmp_path):
    """The LM head inside the bit budget is a version 4 tensor: in a version 3 file (checksums resealed) both
    readers name the version; the version 4 file itself unpacks to the artifact's codes in both."""
    from harness.pack.synthetic import random_artifact
    from tests.pack.conftest import tiny_config

    artifact = random_artifact(tiny_config(), mean_bits=5, seed=2, output_grids=True, lm_head_bits=4)
    good = pack_artifact(artifact, tmp_path / "head.efpk")
    with native.NativeFile(good) as f:
        np.testing.assert_array_equal(f.unpack("lm_head.weight"), artifact.others["lm_head.codes"].numpy())
    cases = [c for c in sealed_but_invalid(good.read_bytes()) if "LM head" in c[0]]
    assert len(cases) == 1
    for _, bad, match in cases:
        path = tmp_path / "bad.efpk"
        path.write_bytes(bad)
        with pytest.raises(NativeError, match=match):
            native.NativeFile(path).close()
        with pytest.raises(PackError, match=match):
            PackedFile(path)


def test_native_errors_are_messages_not_crashes():
    with pytest.raises(NativeError, match="cannot open"):
        native.NativeFile("/nonexistent.efpk")
    with pytest.raises(NativeError, match="shorter than its bit-width section"):
        native.unpack_payload(16, 4, 128, b"\0" * 10)
    with pytest.raises(NativeError, match="not supported|unknown"):
        native.set_unpack_path("neon" if "neon" not in native.supported_paths() else "avx2")


def test_ctest_host():
    """The C++ tests (property tests on every x86 path, reader corruption cases) through ctest."""
    out = ctest("host")
    assert "100% tests passed" in out and "0 failures" in out


@pytest.mark.skipif(not (shutil.which("aarch64-linux-gnu-g++") and shutil.which("qemu-aarch64-static")),
                    reason="needs the Debian packages g++-aarch64-linux-gnu and qemu-user-static")
def test_ctest_aarch64_neon_under_qemu():
    out = ctest("aarch64")
    assert "100% tests passed" in out and "paths scalar neon, 0 failures" in out


def _dump_matches(cmd_prefix, build_dir, packed, artifact, tmp_path, path):
    out = tmp_path / f"dump-{path}.bin"
    env = dict(os.environ, EDGEFLOW_UNPACK=path)
    run = subprocess.run([*cmd_prefix, str(build_dir / "unpack_dump"), str(packed), str(out)], env=env,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == path
    got = np.fromfile(out, np.int8)
    want = np.concatenate([q.codes.numpy().reshape(-1) for q in artifact.linears.values()])
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("layout", ["weightlet", "kquant", "mixed48"])
def test_python_packed_file_unpacks_bit_exact_on_host_paths(tiny_artifact, tmp_path, layout):
    packed = pack_artifact(tiny_artifact, tmp_path / f"{layout}.efpk", layout=layout)
    build_dir = build("host")
    for path in native.supported_paths():
        _dump_matches([], build_dir, packed, tiny_artifact, tmp_path, path)


@pytest.mark.skipif(not (shutil.which("aarch64-linux-gnu-g++") and shutil.which("qemu-aarch64-static")),
                    reason="needs the Debian packages g++-aarch64-linux-gnu and qemu-user-static")
@pytest.mark.parametrize("layout", ["weightlet", "kquant"])
def test_python_packed_file_unpacks_bit_exact_on_neon_under_qemu(tiny_artifact, tmp_path, layout):
    packed = pack_artifact(tiny_artifact, tmp_path / f"{layout}.efpk", layout=layout)
    for path in ("neon", "scalar"):
        _dump_matches(["qemu-aarch64-static"], build("aarch64"), packed, tiny_artifact, tmp_path, path)
