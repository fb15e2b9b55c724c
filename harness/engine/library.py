"""libedgeflow.so through ctypes: the one table of C signatures (mirroring include/edgeflow/c_api.h and engine.h)
and the one error check of the ABI's convention (0 / -1 or NULL, then ef_last_error()).
"""
from __future__ import annotations

import ctypes

from harness.engine.build import NativeError, build
from harness.models import arch


class TensorInfo(ctypes.Structure):  # ef_tensor_info
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_uint32), ("ndim", ctypes.c_uint32),
                ("shape", ctypes.c_uint32 * 4), ("region", ctypes.c_uint32), ("crc32", ctypes.c_uint32),
                ("offset", ctypes.c_uint64), ("size", ctypes.c_uint64)]


class EngineConfig(ctypes.Structure):  # ef_config: the Llama hyper-parameters of an in-memory engine
    _fields_ = [(f.name, ctypes.c_float if f.kind is float else ctypes.c_int32) for f in arch.FIELDS]


_P, _I, _I32, _U32, _U64, _I64, _S = (ctypes.c_void_p, ctypes.c_int, ctypes.c_int32, ctypes.c_uint32, ctypes.c_uint64,
                                      ctypes.c_int64, ctypes.c_char_p)
_SIGNATURES = {  # name -> (restype, argtypes)
    "ef_last_error": (_S, []),
    # c_api.h: packed files and unpack kernels
    "ef_open": (_P, [_S]), "ef_open_memory": (_P, [_P, _U64]), "ef_close": (None, [_P]),
    "ef_num_tensors": (_U32, [_P]), "ef_num_regions": (_U32, [_P]),
    "ef_tensor_info_at": (_I, [_P, _U32, ctypes.POINTER(TensorInfo)]), "ef_find_tensor": (_I64, [_P, _S]),
    "ef_read_tensor": (_I, [_P, _U32, _P, _U64, _I]), "ef_read_region": (_I, [_P, _U32, _P, _U64, _I]),
    "ef_unpack_tensor": (_I, [_P, _U32, _P, _U32, _U32, _P]),
    "ef_unpack_payload": (_I, [_U32, _U32, _U32, _P, _U64, _U32, _U32, _P]),
    "ef_set_unpack_path": (_I, [_S]), "ef_unpack_path": (_S, []), "ef_unpack_path_supported": (_I, [_S]),
    # engine.h: the inference engine
    "ef_engine_open": (_P, [_S, _I32, _I32, _I32]),
    "ef_engine_new": (_P, [ctypes.POINTER(EngineConfig), _I32, _I32, _I32]),
    "ef_engine_set_tensor": (_I, [_P, _S, _S, ctypes.POINTER(ctypes.c_int64), _I32, _P]),
    "ef_engine_score": (_I, [_P, ctypes.POINTER(ctypes.c_int32), _I32, ctypes.POINTER(ctypes.c_float)]),
    "ef_engine_score_after": (_I, [_P, _I32, ctypes.POINTER(ctypes.c_int32), _I32, _I32, _I32,
                                   ctypes.POINTER(ctypes.c_float)]),
    "ef_engine_score_branches": (_I, [_P, _I32, ctypes.POINTER(ctypes.c_int32), ctypes.POINTER(ctypes.c_int32), _I32,
                                      ctypes.POINTER(ctypes.c_float)]),
    "ef_engine_set_schedule": (_I, [_P, _S, _I32, _I32, _I32]),
    "ef_config_size": (_U64, []), "ef_config_offset": (_I64, [_S]),
    "ef_engine_vocab_size": (_I32, [_P]), "ef_engine_gemm_kernel": (_S, []), "ef_engine_free": (None, [_P]),
    "ef_accel_linear": (_I, [_I32, _I32, _I32, _P, _P, _P, _P, ctypes.c_float, _P, _I32, _P]),
    "ef_engine_set_float_outputs": (_I, [_P, _I32]),
}

_lib: ctypes.CDLL | None = None


def lib() -> ctypes.CDLL:
    """The host build's libedgeflow.so (built if stale), its functions typed."""
    global _lib
    if _lib is None:
        c = ctypes.CDLL(str(build("host", "edgeflow") / "libedgeflow.so"))
        for name, (restype, argtypes) in _SIGNATURES.items():
            fn = getattr(c, name)
            fn.restype, fn.argtypes = restype, argtypes
        _lib = c
    return _lib


def last_error() -> str:
    return lib().ef_last_error().decode(errors="replace")


def check(result, error=NativeError):
    """Raises `error` with ef_last_error() if a call failed (-1, or NULL for a handle); returns the result."""
    if result is None or (isinstance(result, int) and result < 0):
        raise error(last_error())
    return result
