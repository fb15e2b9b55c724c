"""The engine's native tests (INT8 GEMM kernels bit-exact against the scalar reference, operators, task graph,
chunked prefill) on both targets: the host build and the static aarch64 build under qemu-aarch64-static."""
from __future__ import annotations

import shutil

import pytest

from harness.runtime import build_runtime, ctest

pytestmark = pytest.mark.native


@pytest.mark.parametrize("target", ["host", "aarch64"])
def test_engine_ctests(target):
    if target == "aarch64" and not (shutil.which("aarch64-linux-gnu-g++") and shutil.which("qemu-aarch64-static")):
        pytest.fail("aarch64 build needs g++-aarch64-linux-gnu and qemu-user-static (make system-deps)")
    build_runtime(target)
    out = ctest(target)
    assert "engine.test_gemm" in out and "100% tests passed" in out
