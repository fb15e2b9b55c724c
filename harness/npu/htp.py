"""Sessions on QNN's HTP backend through ONNX Runtime's QNN execution provider (the `onnxruntime-qnn` plugin).

On x86-64 Linux the backend `libQnnHtp.so` compiles a graph with QNN's HTP compiler and runs it on the HTP
simulator: its outputs are the NPU's numerics, its timings mean nothing. CPU fallback is disabled, so an operator HTP
cannot run is an error, never a silent CPU computation. The simulator is single-threaded.

A context binary is QNN's compiled graph: `compile_context` writes `<stem>.onnx` (a small EPContext wrapper) and
`<stem>_qnn.bin` (the HTP graph with its weights) into a folder; `open_session` on the wrapper loads it without
compiling again.
"""
from __future__ import annotations

import functools
import platform
import time
from pathlib import Path

from harness.npu.config import NpuConfig

EP = "QNNExecutionProvider"


def unavailable_reason() -> str:
    """Why QNN HTP cannot run here ("" when it can)."""
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        return f"onnxruntime-qnn's HTP simulator runs on x86-64 Linux only (this is {platform.system()} " \
               f"{platform.machine()})"
    try:
        _register()
    except ImportError as e:
        return f"onnxruntime-qnn is not installed ({e}); `make setup` installs it"
    except Exception as e:  # a broken wheel: say what ONNX Runtime said
        return f"ONNX Runtime could not load the QNN execution provider: {e}"
    return ""


def require_htp() -> None:
    """Raises NotRun (a 'not run' row) when QNN HTP is unavailable here."""
    from harness.systems.base import NotRun

    reason = unavailable_reason()
    if reason:
        raise NotRun(reason)


@functools.cache
def _register() -> None:
    import onnxruntime as ort
    import onnxruntime_qnn

    ort.set_default_logger_severity(3)  # the plugin warns about Windows-only features on every session
    ort.register_execution_provider_library(EP, onnxruntime_qnn.get_library_path())


def versions() -> str:
    """'onnxruntime-qnn 2.7.0 (QNN ...), onnxruntime 1.32.0': part of every cache key and row note."""
    import onnxruntime as ort
    import onnxruntime_qnn

    return f"onnxruntime-qnn {onnxruntime_qnn.__version__}, onnxruntime {ort.__version__}"


def _options(npu: NpuConfig, context_path: Path | None = None):
    import onnxruntime as ort
    import onnxruntime_qnn

    _register()
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    if context_path is not None:
        so.add_session_config_entry("ep.context_enable", "1")
        so.add_session_config_entry("ep.context_file_path", str(context_path))
        so.add_session_config_entry("ep.context_embed_mode", "0")  # the graph in a .bin beside the wrapper
    devices = [d for d in ort.get_ep_devices() if d.ep_name == EP]
    if not devices:
        raise RuntimeError("the QNN execution provider registered no device")
    so.add_provider_for_devices(devices, {"backend_path": onnxruntime_qnn.get_qnn_htp_path(),
                                          "soc_model": str(npu.soc_model)})
    return so


def open_session(model: bytes | Path, npu: NpuConfig):
    """An InferenceSession of `model` (ONNX bytes: compiled now; a context wrapper's path: loaded) on HTP."""
    import onnxruntime as ort

    return ort.InferenceSession(model if isinstance(model, bytes) else str(model), _options(npu))


def compile_context(model: bytes, npu: NpuConfig, folder: Path, stem: str) -> tuple[Path, float]:
    """(wrapper path, seconds): QNN compiles `model` for npu's SoC into folder/<stem>.onnx + <stem>_qnn.bin."""
    import onnxruntime as ort

    folder.mkdir(parents=True, exist_ok=True)
    wrapper = folder / f"{stem}.onnx"
    t0 = time.perf_counter()
    ort.InferenceSession(model, _options(npu, wrapper))
    seconds = time.perf_counter() - t0
    if not wrapper.is_file() or not context_binary(wrapper).is_file():
        raise RuntimeError(f"QNN wrote no context binary for {stem} in {folder}")
    return wrapper, seconds


def context_binary(wrapper: Path) -> Path:
    """The `<stem>_qnn.bin` a context wrapper refers to."""
    return wrapper.with_name(f"{wrapper.stem}_qnn.bin")
