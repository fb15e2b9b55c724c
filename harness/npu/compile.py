"""Per-layer QNN context binaries, compiled once per (graph content, SoC, QNN version) and cached.

A cache entry is a folder <cache>/qnn/<soc>/<key>/ with layer.onnx (the EPContext wrapper), layer_qnn.bin (QNN's
compiled HTP graph, weights included) and meta.json (how long QNN took to compile it, with which versions).
"""
from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path

from harness.cache import atomic_directory, cache_dir
from harness.npu.config import NpuConfig
from harness.npu.graph import LayerGraph
from harness.npu.htp import compile_context, context_binary, open_session, versions

STEM = "layer"


@dataclass(frozen=True)
class CompiledLayer:
    wrapper: Path  # open with harness.npu.htp.open_session
    compile_s: float  # QNN's graph construction and compilation (QDQ ONNX -> HTP context), when it was made
    context_bytes: int  # the context binary: QNN's graph with the weights it embeds
    weight_bytes: int  # the INT8 codes and scales the graph was built from
    cached: bool  # True when this call found it in the cache

    def load_s(self, npu: NpuConfig) -> float:
        """Seconds to open a session on the context binary (no compilation): what a runtime with materialized
        binaries pays instead of compile_s."""
        t0 = time.perf_counter()
        open_session(self.wrapper, npu)
        return time.perf_counter() - t0


def cache_key(graph: LayerGraph, npu: NpuConfig) -> str:
    h = hashlib.sha256(graph.model)
    h.update(f"soc {npu.soc_model}; {versions()}".encode())
    return h.hexdigest()[:20]


def compiled_layer(graph: LayerGraph, npu: NpuConfig) -> CompiledLayer:
    """The context binary of `graph` for npu's SoC, compiled now or found in the cache."""
    folder = cache_dir("qnn", npu.name) / cache_key(graph, npu)
    meta_path = folder / "meta.json"
    cached = meta_path.is_file()
    if not cached:  # parallel sweeps may compile the same graph: the first to finish keeps its entry
        with atomic_directory(folder, keep_existing=True) as tmp:
            _, seconds = compile_context(graph.model, npu, tmp, STEM)
            (tmp / "meta.json").write_text(json.dumps(
                {"compile_s": seconds, "soc_model": npu.soc_model, "htp_arch": npu.htp_arch, "versions": versions()}))
    meta = json.loads(meta_path.read_text())
    wrapper = folder / f"{STEM}.onnx"
    return CompiledLayer(wrapper, meta["compile_s"], context_binary(wrapper).stat().st_size, graph.weight_bytes,
                         cached)
