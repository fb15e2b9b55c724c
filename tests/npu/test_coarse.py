"""llm.npu's coarse split (harness/npu/coarse.py): the same linears as EdgeFlow's accelerator graph, plus the norms,
SiLU and residual adds, in two graphs per layer that QNN's HTP compiles and runs without a CPU fallback."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from harness.npu.coarse import coarse_graphs
from harness.npu.config import load_npu_config
from harness.npu.graph import bound_output_scale, layer_graph, layer_linears
from harness.npu.htp import open_session, unavailable_reason
from tests.runtime.conftest import make_artifact, tiny_llama


@pytest.fixture(scope="module")
def artifact():
    return make_artifact(tiny_llama(layers=2))


def ops(graph) -> Counter:
    import onnx

    return Counter(n.op_type for n in onnx.load_from_string(graph.model).graph.node)


def test_two_graphs_per_layer_hold_the_linears_and_what_lies_between_them(artifact):
    graphs = coarse_graphs(artifact, 1, tokens=8)
    qkv, ffn = ops(graphs["qkv"]), ops(graphs["ffn"])
    assert qkv["MatMul"] == 3 and not {"RMSNormalization", "Add", "Sigmoid"} & qkv.keys()  # the norm is the CPU's
    assert ffn["MatMul"] == 4 and ffn["RMSNormalization"] == 1 and ffn["Sigmoid"] == 1
    assert ffn["Add"] == 2 and ffn["Mul"] == 2  # two residual adds; SiLU's x * sigmoid(x) and its product with up
    linears = layer_linears(artifact, 1)
    edgeflow = layer_graph(linears, {n: bound_output_scale(q) for n, q in linears.items()}, None, 8)
    assert graphs["qkv"].weight_bytes + graphs["ffn"].weight_bytes == edgeflow.weight_bytes  # the same weights


def test_a_layer_without_its_linears_is_named(artifact):
    from harness.artifact import Artifact

    partial = Artifact(artifact.manifest, {n: q for n, q in artifact.linears.items() if "mlp.up_proj" not in n},
                       artifact.others)
    with pytest.raises(ValueError, match=r"layer 0 lacks the quantized linears \['up_proj'\]"):
        coarse_graphs(partial, 0, tokens=8)


@pytest.mark.skipif(bool(unavailable_reason()), reason=unavailable_reason() or "")
def test_htp_runs_both_graphs_whole(artifact, tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEFLOW_CACHE", str(tmp_path))
    npu = load_npu_config()
    for name, graph in coarse_graphs(artifact, 0, tokens=8).items():
        session = open_session(graph.model, npu)  # compiled now; an operator HTP cannot run would raise
        feeds = {i.name: np.full(i.shape, 128, np.uint8) if i.type == "tensor(uint8)"
                 else np.ones(i.shape, np.float32) for i in session.get_inputs()}
        outputs = session.run(None, feeds)
        assert all(o.dtype == np.float32 and np.isfinite(o).all() for o in outputs), name
