"""EdgeFlow's accelerator half on Qualcomm's QNN HTP, reached through ONNX Runtime's QNN execution provider
(the `onnxruntime-qnn` wheel: the HTP graph compiler and the HTP simulator for x86-64 Linux).

    config.py   the `npu` config group (conf/npu/): which SoC the graphs are compiled for
    htp.py      sessions on the HTP backend, context binaries (compile once, load fast), "not run" reasons
    graph.py    a decoder layer's accelerator matmuls as a QDQ ONNX graph, from a quantized artifact
    compile.py  per-layer context binaries cached by content, with compile time and bytes
    oracle.py   HTP's outputs against the fake-quant reference and the runtime's accelerator lane, in LSBs
"""
