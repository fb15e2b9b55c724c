"""Benchmarks (`make bench-*`): each prints ratios against a peer measured in the same run, never a timed assertion.

    runtime    make bench-runtime    our engine against llama.cpp Q8_0 and the machine's INT8 peak, cold and warm
    pipeline   make bench-pipeline   cold TTFT of each pipeline policy (conf/pipeline/), interleaved
    unpack     make bench-unpack     packing formats: cold load, unpack and load+unpack per layout and bit-width
    quant      make bench-quant      quantization time against model width and threads
    baselines  make bench-baselines  llama.cpp Q8_0 and MNN INT8 cold TTFT, native and emulated flash
"""
