// Timestamps of every task run, kept in memory and written as Chrome trace-event JSON (opens in Perfetto and
// chrome://tracing): one "X" (complete) event per task, one track per executor thread (I/O and unpack
// threads, the CPU lane's and the accelerator lane's dispatchers, helpers).
#pragma once
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace edgeflow {

// Seconds since the process-wide epoch (set once, at the first call: call it early in main).
double now_s();

struct TraceEvent {
    std::string name;   // operator, e.g. "qkv"
    std::string track;  // executor thread, e.g. "accel-0"
    std::string cat;    // "io", "unpack", "cpu", "accel"
    int layer = -1, chunk = -1;
    double t0 = 0, t1 = 0;  // seconds, now_s() clock
    bool stolen = false;    // an accelerator task run by a CPU worker (task stealing)
};

class Trace {
public:
    void add(TraceEvent e);
    std::vector<TraceEvent> events() const;
    void write_chrome_json(const std::string& path) const;  // throws EngineError if the file cannot be written

private:
    mutable std::mutex mu_;
    std::vector<TraceEvent> events_;
};

}  // namespace edgeflow
