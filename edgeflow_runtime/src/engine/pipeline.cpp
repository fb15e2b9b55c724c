#include "pipeline.h"

#include <algorithm>

namespace edgeflow {

Executors::Executors(int threads, int io_threads, int unpack_threads, Trace* trace)
    : io(std::make_unique<QueueExecutor>("io", io_threads, 0, trace)),
      unpack(std::make_unique<QueueExecutor>("unpack", unpack_threads, 0, trace)),
      cpu(std::make_unique<CpuExecutor>(threads, trace)),
      accel(std::make_unique<AcceleratorEmulator>(threads, trace)) {}

void Executors::lanes(Executor* out[kNumLanes]) const {
    out[int(Lane::IO)] = io.get();
    out[int(Lane::Unpack)] = unpack.get();
    out[int(Lane::CPU)] = cpu.get();
    out[int(Lane::Accel)] = accel.get();
}

std::vector<ChunkState> run_prefill(Model& model, WeightSource* source, KvCache& cache, Executors& ex,
                                    const std::vector<int32_t>& tokens, const PrefillOptions& opt) {
    const LlamaConfig& cfg = model.cfg;
    const int n_tok = int(tokens.size());
    if (n_tok == 0) throw EngineError("the prompt is empty");
    if (opt.chunk <= 0) throw EngineError("chunk size must be positive");
    if (n_tok > cache.ctx)
        throw EngineError("prompt of " + std::to_string(n_tok) + " tokens exceeds the context of " +
                          std::to_string(cache.ctx));
    const int n_chunks = (n_tok + opt.chunk - 1) / opt.chunk;
    const int L = cfg.n_layers;
    if (source) model.layers.resize(L);

    std::vector<ChunkState> chunks(n_chunks);
    for (int c = 0; c < n_chunks; ++c) {
        const int p0 = c * opt.chunk;
        chunks[c].init(cfg, p0, tokens.data() + p0, std::min(opt.chunk, n_tok - p0));
    }
    Forward fwd(model, cache, *ex.cpu->pool(), *ex.accel->pool());

    // Default priority: topological order of (layer, chunk, stage), so that an executor prefers the earliest work.
    constexpr int kStages = 16;
    auto prio = [&](int layer, int chunk, int stage) { return (long(layer + 1) * n_chunks + chunk) * kStages + stage; };

    TaskGraph g;
    std::vector<Task*> unpacked(L + 2, nullptr);  // unit -> its unpack task (none when the model is in memory)
    if (source) {
        for (int u = 0; u < L + 2; ++u) {
            Task* ld = g.add("load", u - 1, -1, Lane::IO, u, [source, u] { source->load(u); });
            Task* up = g.add("unpack", u - 1, -1, Lane::Unpack, u, [source, u, &model] { source->unpack(u, model); });
            TaskGraph::depend(ld, up);
            unpacked[u] = up;
        }
    }
    std::vector<Task*> last(n_chunks, nullptr);       // latest stage of each chunk
    std::vector<Task*> prev_attn(n_chunks, nullptr);  // attention(l, c) per chunk of the current layer
    for (int c = 0; c < n_chunks; ++c) {
        ChunkState* s = &chunks[c];
        last[c] = g.add("embed", -1, c, Lane::CPU, prio(-1, c, 0), [&fwd, s] { fwd.embed(*s); });
        TaskGraph::depend(unpacked[0], last[c]);
    }
    for (int l = 0; l < L; ++l) {
        for (int c = 0; c < n_chunks; ++c) {
            ChunkState* s = &chunks[c];
            auto stage = [&](const char* name, Lane lane, int k, std::function<void()> fn) {
                Task* t = g.add(name, l, c, lane, prio(l, c, k), std::move(fn));
                TaskGraph::depend(last[c], t);
                last[c] = t;
                return t;
            };
            Task* first = stage("attn_in", Lane::CPU, 0, [&fwd, l, s] { fwd.attn_in(l, *s); });
            TaskGraph::depend(unpacked[l + 1], first);
            stage("qkv", Lane::Accel, 1, [&fwd, l, s] { fwd.qkv(l, *s); });
            Task* attn = stage("attention", Lane::CPU, 2, [&fwd, l, s] { fwd.attention(l, *s); });
            if (c > 0) TaskGraph::depend(prev_attn[c - 1], attn);
            prev_attn[c] = attn;
            stage("o_proj", Lane::Accel, 3, [&fwd, l, s] { fwd.o_proj(l, *s); });
            stage("ffn_in", Lane::CPU, 4, [&fwd, l, s] { fwd.ffn_in(l, *s); });
            stage("gate_up", Lane::Accel, 5, [&fwd, l, s] { fwd.gate_up(l, *s); });
            stage("swiglu", Lane::CPU, 6, [&fwd, l, s] { fwd.swiglu(l, *s); });
            stage("down", Lane::Accel, 7, [&fwd, l, s] { fwd.down(l, *s); });
        }
    }
    for (int c = 0; c < n_chunks; ++c) {
        if (!opt.all_logits && c != n_chunks - 1) continue;
        ChunkState* s = &chunks[c];
        const bool all = opt.all_logits;
        Task* h = g.add("head", L, c, Lane::CPU, prio(L, c, 0), [&fwd, s, all] { fwd.head(*s, all); });
        TaskGraph::depend(last[c], h);
        TaskGraph::depend(unpacked[L + 1], h);
    }
    if (!source) {
        model.check_globals();
        for (int l = 0; l < L; ++l) model.check_layer(l);
    }
    if (source) g.on_failure = [source] { source->cancel(); };
    Executor* lanes[kNumLanes];
    ex.lanes(lanes);
    g.run(lanes);
    return chunks;
}

}  // namespace edgeflow
