"""Builds of edgeflow_runtime/ (CMake): configured once per build directory, rebuilt when a source is newer than the
last build, serialised across processes by a file lock.

    build("host")                  every target of the host build; returns its build directory
    engine_binary("aarch64")       the static aarch64 edgeflow-run (built if needed), e.g. for a phone
    ctest("sanitize")              the C++ tests under AddressSanitizer + UBSan
"""
from __future__ import annotations

import subprocess
from pathlib import Path

from harness.cache import exclusive

RUNTIME = Path(__file__).resolve().parents[2] / "edgeflow_runtime"

# name -> (build dir, extra CMake arguments)
BUILDS: dict[str, tuple[Path, list[str]]] = {
    "host": (RUNTIME / "build-host", []),
    "aarch64": (RUNTIME / "build-aarch64", [f"-DCMAKE_TOOLCHAIN_FILE={RUNTIME / 'cmake/aarch64-linux-gnu.cmake'}",
                                            "-DEDGEFLOW_SHARED=OFF"]),
    "fuzz": (RUNTIME / "build-fuzz", ["-DCMAKE_CXX_COMPILER=clang++", "-DEDGEFLOW_FUZZ=ON", "-DEDGEFLOW_SHARED=OFF",
                                      "-DEDGEFLOW_TESTS=OFF", "-DEDGEFLOW_BENCH=OFF"]),
    "sanitize": (RUNTIME / "build-sanitize", [
        "-DCMAKE_BUILD_TYPE=RelWithDebInfo", "-DEDGEFLOW_SHARED=OFF", "-DEDGEFLOW_BENCH=OFF",
        "-DCMAKE_CXX_FLAGS=-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"]),
}


class NativeError(RuntimeError):
    """A build step failed, or the native library reported an error (its message is passed on as is)."""


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    run = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if run.returncode:
        raise NativeError(f"{' '.join(map(str, cmd))} failed:\n{run.stdout[-3000:]}{run.stderr[-3000:]}")
    return run


def build(name: str = "host", target: str | None = None) -> Path:
    """Configures and builds one of BUILDS (all targets, or `target`) if any source is newer than its last build;
    a file lock serialises parallel callers. Returns the build directory."""
    if name not in BUILDS:
        raise ValueError(f"unknown runtime build {name!r}; choose one of {sorted(BUILDS)}")
    build_dir, args = BUILDS[name]
    build_dir.mkdir(parents=True, exist_ok=True)
    stamp = build_dir / f".built-{target or 'all'}"
    with exclusive(build_dir / ".build.lock"):
        sources = [RUNTIME / "CMakeLists.txt", *RUNTIME.glob("cmake/*"),
                   *(p for d in ("include", "src", "tests", "bench", "fuzz") for p in RUNTIME.glob(f"{d}/**/*"))]
        newest = max(p.stat().st_mtime for p in sources if p.is_file())
        if not stamp.exists() or stamp.stat().st_mtime < newest:
            # CMAKE_BUILD_TYPE first: a build's own arguments (sanitize: RelWithDebInfo) override it.
            _run(["cmake", "-S", str(RUNTIME), "-B", str(build_dir), "-DCMAKE_BUILD_TYPE=Release", *args])
            _run(["nice", "-n", "10", "cmake", "--build", str(build_dir), "-j2", *(["--target", target] if target else [])])
            stamp.touch()
    return build_dir


def engine_dir(name: str = "host") -> Path:
    """Where a build's engine binaries are (edgeflow-run, edgeflow-bench-int8)."""
    return BUILDS[name][0] / "src" / "engine"


def engine_binary(name: str = "host", program: str = "edgeflow-run") -> Path:
    """One engine program of a build, built (that target only) if missing or stale."""
    build(name, target=program)
    return engine_dir(name) / program


def ctest(name: str = "host") -> str:
    """Builds and runs the C++ tests (on aarch64 through qemu-aarch64-static); returns ctest's verbose output."""
    return _run(["ctest", "--output-on-failure", "-V"], cwd=build(name)).stdout
