// The engine's defaults, each defined once: EngineOptions, SchedOptions, PrefillOptions and edgeflow-run's --help
// take them from here. The harness's Python side (harness/engine/run.py DEFAULT_*) is checked against this file by
// tests/test_defaults.py, which also fails when a default is spelled anywhere else.
#pragma once

namespace edgeflow::defaults {

constexpr int kThreads = 2;         // compute threads of the whole engine (CPU, accelerator and unpack lanes)
constexpr int kChunk = 128;         // prompt tokens per prefill chunk
constexpr int kStealThreshold = 5;  // an idle CPU worker steals when the accelerator queue holds more tasks than this
constexpr const char* kPolicy = "place+priority+steal";  // the last of the policies, EdgeFlow's (executor.h)

}  // namespace edgeflow::defaults
