"""The packed-file reader and unpack kernels of edgeflow_runtime (libedgeflow.so, C ABI include/edgeflow/c_api.h)
through ctypes: open and validate a .efpk file, list and read its tensors, unpack quantized weights to int8.
"""
from __future__ import annotations

import ctypes

import numpy as np

from harness.engine.library import TensorInfo, check, lib

PATHS = ("scalar", "sse", "avx2", "neon")  # unpack kernels (edgeflow_runtime/src/unpack/)


def supported_paths() -> list[str]:
    return [p for p in PATHS if lib().ef_unpack_path_supported(p.encode())]


def set_unpack_path(name: str) -> None:
    check(lib().ef_set_unpack_path(name.encode()))


def unpack_payload(dtype: int, channels: int, dim: int, payload: bytes, c0: int = 0, c1: int | None = None) -> np.ndarray:
    """int8 [c1 - c0, dim]: channels [c0, c1) of a quantized payload, unpacked by the active native path."""
    c1 = channels if c1 is None else c1
    out = np.empty((max(c1 - c0, 0), dim), np.int8)
    buf = np.frombuffer(payload, np.uint8)
    check(lib().ef_unpack_payload(dtype, channels, dim, buf.ctypes.data, buf.size, c0, c1, out.ctypes.data))
    return out


class NativeFile:
    """A packed model file opened by the native reader (validation happens in ef_open)."""

    def __init__(self, path):
        self._h = None  # __del__ runs even when the open fails
        self._h = check(lib().ef_open(str(path).encode()))

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
            check(lib().ef_tensor_info_at(self._h, i, ctypes.byref(info)))
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
        check(lib().ef_read_tensor(self._h, i, buf, size, int(verify_crc)))
        return buf.raw[:size]

    def unpack(self, name: str, c0: int = 0, c1: int | None = None) -> np.ndarray:
        """int8 [c1 - c0, D] of the quantized weight `name` (e.g. 'model.layers.0.mlp.up_proj.weight')."""
        i = self.index(name)
        info = self.tensors()[i]
        c, d = info.shape[0], info.shape[1]
        c1 = c if c1 is None else c1
        payload = np.frombuffer(self.read(name), np.uint8)
        out = np.empty((max(c1 - c0, 0), d), np.int8)
        check(lib().ef_unpack_tensor(self._h, i, payload.ctypes.data, c0, c1, out.ctypes.data))
        return out
