#include "trace.h"

#include <cstdio>
#include <map>

#include "model.h"

namespace edgeflow {

double now_s() {
    static const auto epoch = std::chrono::steady_clock::now();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch).count();
}

void Trace::add(TraceEvent e) {
    std::lock_guard<std::mutex> lk(mu_);
    events_.push_back(std::move(e));
}

std::vector<TraceEvent> Trace::events() const {
    std::lock_guard<std::mutex> lk(mu_);
    return events_;
}

void Trace::write_chrome_json(const std::string& path) const {
    const auto evs = events();
    FILE* f = std::fopen(path.c_str(), "w");
    if (!f) throw EngineError("cannot write trace file " + path);
    // Tracks are numbered in order of first appearance and named by "thread_name" metadata events.
    std::map<std::string, int> tid;
    for (const auto& e : evs) tid.emplace(e.track, int(tid.size()) + 1);
    std::fprintf(f, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n");
    bool first = true;
    for (const auto& [track, id] : tid) {
        std::fprintf(f, "%s{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": 1, \"tid\": %d, \"args\": {\"name\": \"%s\"}}",
                     first ? "" : ",\n", id, track.c_str());
        first = false;
    }
    for (const auto& e : evs) {
        std::fprintf(f,
                     "%s{\"ph\": \"X\", \"name\": \"%s\", \"cat\": \"%s\", \"pid\": 1, \"tid\": %d, \"ts\": %.3f, "
                     "\"dur\": %.3f, \"args\": {\"layer\": %d, \"chunk\": %d, \"stolen\": %s}}",
                     first ? "" : ",\n", e.name.c_str(), e.cat.c_str(), tid[e.track], e.t0 * 1e6, (e.t1 - e.t0) * 1e6,
                     e.layer, e.chunk, e.stolen ? "true" : "false");
        first = false;
    }
    std::fprintf(f, "\n]}\n");
    if (std::fclose(f) != 0) throw EngineError("cannot write trace file " + path);
}

}  // namespace edgeflow
