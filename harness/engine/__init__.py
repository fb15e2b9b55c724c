"""edgeflow_runtime (the C++ engine) from Python, one module per way in:

    build    CMake builds (host, aarch64, fuzz, sanitize), engine_binary(), ctest()
    run      edgeflow-run's command line and JSON report: command(), run_edgeflow(), parse_report()
    capi     the forward pass in process: NativeEngine.logits / logprobs
    library  libedgeflow.so (the C ABI of format and capi): its signatures and its one error check
    format   the packed-file reader and unpack kernels (libedgeflow.so): NativeFile, unpack_payload

`python -m harness.engine build|test|fuzz|sanitize` builds and tests it (make native, test-native, fuzz,
test-sanitize).
"""
