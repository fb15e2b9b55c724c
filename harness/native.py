"""The native library (edgeflow_runtime, libedgeflow.so) from Python: built with CMake into
edgeflow_runtime/build-host when missing or older than its sources, loaded with ctypes (C ABI: include/edgeflow/c_api.h).
"""
from __future__ import annotations

import ctypes
import fcntl
import subprocess
from pathlib import Path

import numpy as np

RUNTIME = Path(__file__).resolve().parent.parent / "edgeflow_runtime"
BUILD = RUNTIME / "build-host"
LIBRARY = BUILD / "libedgeflow.so"
PATHS = ("scalar", "sse", "avx2", "neon")


class NativeError(RuntimeError):
    """The native library reported an error (its message is passed on as is)."""


class TensorInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_uint32), ("ndim", ctypes.c_uint32),
                ("shape", ctypes.c_uint32 * 4), ("region", ctypes.c_uint32), ("crc32", ctypes.c_uint32),
                ("offset", ctypes.c_uint64), ("size", ctypes.c_uint64)]


BUILDS = {  # name -> (build dir, extra CMake arguments)
    "host": (BUILD, []),
    "aarch64": (RUNTIME / "build-aarch64", [f"-DCMAKE_TOOLCHAIN_FILE={RUNTIME / 'cmake/aarch64-linux-gnu.cmake'}",
                                            "-DEDGEFLOW_SHARED=OFF"]),
    "fuzz": (RUNTIME / "build-fuzz", ["-DCMAKE_CXX_COMPILER=clang++", "-DEDGEFLOW_FUZZ=ON", "-DEDGEFLOW_SHARED=OFF",
                                      "-DEDGEFLOW_TESTS=OFF", "-DEDGEFLOW_BENCH=OFF"]),
}


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    run = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if run.returncode:
        raise NativeError(f"{' '.join(map(str, cmd))} failed:\n{run.stdout[-3000:]}{run.stderr[-3000:]}")
    return run


def build(name: str = "host", target: str | None = None) -> Path:
    """Configure and build one of BUILDS (all targets, or `target`) if any source is newer than its last build; a
    file lock serialises parallel callers. Returns the build directory."""
    build_dir, args = BUILDS[name]
    build_dir.mkdir(parents=True, exist_ok=True)
    stamp = build_dir / f".built-{target or 'all'}"
    with open(build_dir / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        sources = [RUNTIME / "CMakeLists.txt", *RUNTIME.glob("cmake/*"),
                   *(p for d in ("include", "src", "tests", "bench", "fuzz") for p in RUNTIME.glob(f"{d}/**/*"))]
        newest = max(p.stat().st_mtime for p in sources if p.is_file())
        if not stamp.exists() or stamp.stat().st_mtime < newest:
            _run(["cmake", "-S", str(RUNTIME), "-B", str(build_dir), "-DCMAKE_BUILD_TYPE=Release", *args])
            _run(["nice", "-n", "10", "cmake", "--build", str(build_dir), "-j2", *(["--target", target] if target else [])])
            stamp.touch()
    return build_dir


def ctest(name: str = "host") -> str:
    """Builds and runs the C++ tests (on aarch64 through qemu-aarch64-static); returns ctest's verbose output."""
    return _run(["ctest", "--output-on-failure", "-V"], cwd=build(name)).stdout


_lib = None


def lib() -> ctypes.CDLL:
    global _lib
    if _lib is None:
        c = ctypes.CDLL(str(build("host", "edgeflow") / LIBRARY.name))
        P, U32, U64, I64 = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_int64
        sig = {
            "ef_last_error": (ctypes.c_char_p, []), "ef_open": (P, [ctypes.c_char_p]), "ef_open_memory": (P, [P, U64]),
            "ef_close": (None, [P]), "ef_num_tensors": (U32, [P]), "ef_num_regions": (U32, [P]),
            "ef_tensor_info_at": (ctypes.c_int, [P, U32, ctypes.POINTER(TensorInfo)]),
            "ef_find_tensor": (I64, [P, ctypes.c_char_p]),
            "ef_read_tensor": (ctypes.c_int, [P, U32, P, U64, ctypes.c_int]),
            "ef_read_region": (ctypes.c_int, [P, U32, P, U64, ctypes.c_int]),
            "ef_unpack_tensor": (ctypes.c_int, [P, U32, P, U32, U32, P]),
            "ef_unpack_payload": (ctypes.c_int, [U32, U32, U32, P, U64, U32, U32, P]),
            "ef_set_unpack_path": (ctypes.c_int, [ctypes.c_char_p]), "ef_unpack_path": (ctypes.c_char_p, []),
            "ef_unpack_path_supported": (ctypes.c_int, [ctypes.c_char_p]),
        }
        for name, (res, args) in sig.items():
            fn = getattr(c, name)
            fn.restype, fn.argtypes = res, args
        _lib = c
    return _lib


def _check(rc: int) -> None:
    if rc != 0:
        raise NativeError(lib().ef_last_error().decode())


def supported_paths() -> list[str]:
    return [p for p in PATHS if lib().ef_unpack_path_supported(p.encode())]


def set_unpack_path(name: str) -> None:
    _check(lib().ef_set_unpack_path(name.encode()))


def unpack_payload(dtype: int, channels: int, dim: int, payload: bytes, c0: int = 0, c1: int | None = None) -> np.ndarray:
    """int8 [c1 - c0, dim]: channels [c0, c1) of a quantized payload, unpacked by the active native path."""
    c1 = channels if c1 is None else c1
    out = np.empty((max(c1 - c0, 0), dim), np.int8)
    buf = np.frombuffer(payload, np.uint8)
    _check(lib().ef_unpack_payload(dtype, channels, dim, buf.ctypes.data, buf.size, c0, c1, out.ctypes.data))
    return out


class NativeFile:
    """A packed model file opened by the native reader (validation happens in ef_open)."""

    def __init__(self, path):
        self._h = lib().ef_open(str(path).encode())
        if not self._h:
            raise NativeError(lib().ef_last_error().decode())

    def close(self) -> None:
        if self._h:
            lib().ef_close(self._h)
            self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()

    def tensors(self) -> list[TensorInfo]:
        out = []
        for i in range(lib().ef_num_tensors(self._h)):
            info = TensorInfo()
            _check(lib().ef_tensor_info_at(self._h, i, ctypes.byref(info)))
            out.append(info)
        return out

    def index(self, name: str) -> int:
        i = lib().ef_find_tensor(self._h, name.encode())
        if i < 0:
            raise KeyError(name)
        return i

    def read(self, name: str, verify_crc: bool = True) -> bytes:
        i = self.index(name)
        size = self.tensors()[i].size
        buf = ctypes.create_string_buffer(max(size, 1))
        _check(lib().ef_read_tensor(self._h, i, buf, size, int(verify_crc)))
        return buf.raw[:size]

    def unpack(self, name: str, c0: int = 0, c1: int | None = None) -> np.ndarray:
        """int8 [c1 - c0, D] of the quantized weight `name` (e.g. 'model.layers.0.mlp.up_proj.weight')."""
        i = self.index(name)
        info = self.tensors()[i]
        c, d = info.shape[0], info.shape[1]
        c1 = c if c1 is None else c1
        payload = np.frombuffer(self.read(name), np.uint8)
        out = np.empty((max(c1 - c0, 0), d), np.int8)
        _check(lib().ef_unpack_tensor(self._h, i, payload.ctypes.data, c0, c1, out.ctypes.data))
        return out


def _main() -> None:
    import argparse
    import shutil
    import sys

    ap = argparse.ArgumentParser(description="build and test edgeflow_runtime")
    ap.add_argument("command", choices=["build", "test", "fuzz"])
    ap.add_argument("--arch", choices=["host", "aarch64", "all"], default="host")
    ap.add_argument("--seconds", type=int, default=60, help="fuzz: libFuzzer -max_total_time")
    a = ap.parse_args()
    if a.command == "fuzz":
        from harness.pack.fuzz_corpus import write_corpus
        out = build("fuzz", "fuzz_reader")
        corpus = write_corpus(out / "corpus")
        cmd = [str(out / "fuzz_reader"), "-max_total_time=%d" % a.seconds, "-max_len=65536", "-print_final_stats=1",
               f"-artifact_prefix={out}/crash-", str(corpus)]
        print(" ".join(cmd), flush=True)
        sys.exit(subprocess.run(cmd).returncode)
    arches = ["host", "aarch64"] if a.arch == "all" else [a.arch]
    for arch in arches:
        if arch == "aarch64" and not (shutil.which("aarch64-linux-gnu-g++") and shutil.which("qemu-aarch64-static")):
            sys.exit("aarch64 needs the Debian packages g++-aarch64-linux-gnu and qemu-user-static")
        if a.command == "build":
            print(f"{arch}: built in {build(arch)}")
        else:
            print(ctest(arch))


if __name__ == "__main__":
    _main()
