#include "pipeline.h"

#include <algorithm>

namespace edgeflow {

Executors::Executors(const SchedOptions& c, int io_threads, Trace* trace)
    : io(std::make_unique<QueueExecutor>("io", io_threads, 0, trace)),
      compute(std::make_unique<ComputeScheduler>(c, trace)) {}

static SchedOptions with_threads(int threads) {
    SchedOptions o;
    o.threads = threads;
    return o;
}

Executors::Executors(int threads, int io_threads, Trace* trace)
    : Executors(with_threads(threads), io_threads, trace) {}

void Executors::lanes(Executor* out[kNumLanes]) const {
    out[int(Lane::IO)] = io.get();
    out[int(Lane::Unpack)] = compute.get();
    out[int(Lane::CPU)] = compute.get();
    out[int(Lane::Accel)] = compute.get();
}

// Figure 17 (place*): INT8 matmuls on the accelerator, the rest on the CPU. llm.npu (section 3.2): only attention
// (and, here, the embedding lookup and the float LM head, which llm.npu also keeps off the NPU) on the CPU.
Lane stage_lane(Policy policy, const std::string& stage) {
    const bool matmul = stage == "qkv" || stage == "o_proj" || stage == "gate_up" || stage == "down";
    if (matmul) return Lane::Accel;
    if (policy == Policy::LlmNpuStatic && (stage == "attn_in" || stage == "ffn_in" || stage == "swiglu"))
        return Lane::Accel;
    return Lane::CPU;
}

// Lower runs first. Topological (llmnpu-static, place): the order of the model's execution graph, layer by layer
// and within a layer stage by stage, each stage for every chunk (section 4.3, Figure 9a: the NPU runs Q/K/V for all
// chunks first), so a later chunk's O projection goes before an earlier chunk's FFN. Position-guided
// (place+priority*): by chunk position, an earlier prompt chunk's stage before any later chunk's (Figure 9b), which
// unlocks its accelerator stages sooner. layer -1 is the embedding, n_layers the head; stage_index < 16 orders
// stages within a layer.
long stage_priority(Policy policy, int layer, int chunk, int stage_index, int n_layers, int n_chunks) {
    constexpr int kStages = 16;
    if (policy == Policy::LlmNpuStatic || policy == Policy::Place)
        return (long(layer + 1) * kStages + stage_index) * n_chunks + chunk;
    return (long(chunk) * (n_layers + 2) + (layer + 1)) * kStages + stage_index;
}

std::vector<ChunkState> run_prefill(Model& model, WeightSource* source, KvCache& cache, Executors& ex,
                                    const std::vector<int32_t>& tokens, const PrefillOptions& opt) {
    const LlamaConfig& cfg = model.cfg;
    const int n_tok = int(tokens.size());
    if (n_tok == 0) throw EngineError("the prompt is empty");
    if (opt.chunk <= 0) throw EngineError("chunk size must be positive");
    if (opt.start < 0) throw EngineError("the first position must not be negative");
    int span = n_tok;  // positions the new tokens occupy: a branch's length when they are sibling branches
    if (!opt.branches.empty()) {
        long sum = 0;
        for (int n : opt.branches) {
            if (n <= 0) throw EngineError("every branch needs at least one token (got " + std::to_string(n) + ")");
            sum += n;
        }
        if (sum != n_tok)
            throw EngineError("branch lengths add up to " + std::to_string(sum) + ", not the " +
                              std::to_string(n_tok) + " tokens given");
        span = *std::max_element(opt.branches.begin(), opt.branches.end());
    }
    if (opt.start + span > cache.ctx)
        throw EngineError("prompt of " + std::to_string(span) + " tokens" +
                          (opt.start ? " after " + std::to_string(opt.start) + " kept ones" : std::string()) +
                          " exceeds the context of " + std::to_string(cache.ctx));
    const int chunk_len = opt.branches.empty() ? opt.chunk : n_tok;  // sibling branches run as one chunk
    const int n_chunks = (n_tok + chunk_len - 1) / chunk_len;
    const int L = cfg.n_layers;
    if (source) {
        model.layers.resize(L);
        source->expect_tokens(tokens);
    }

    std::vector<ChunkState> chunks(n_chunks);
    for (int c = 0; c < n_chunks; ++c) {
        const int t0 = c * chunk_len;  // chunks are cut from the new tokens, so they sit at start + t0
        chunks[c].init(cfg, opt.start + t0, tokens.data() + t0, std::min(chunk_len, n_tok - t0));
    }
    chunks[0].branches = opt.branches;
    Forward fwd(model, cache, ex.compute->cpu_pool(), ex.compute->accel_pool());
    const Policy policy = opt.policy;
    auto prio = [&](int layer, int chunk, int stage) { return stage_priority(policy, layer, chunk, stage, L, n_chunks); };

    TaskGraph g;
    std::vector<Task*> unpacked(L + 2, nullptr);  // unit -> its unpack task (none when the model is in memory)
    if (source) {
        ThreadPool* pool = &ex.compute->cpu_pool();  // an unpack task's data-parallel items (any idle compute thread)
        std::vector<int> read_rank(L + 2);  // the I/O lane reads in the source's order
        const std::vector<int> order = source->load_order(L + 2);
        for (int i = 0; i < L + 2; ++i) read_rank.at(size_t(order.at(size_t(i)))) = i;
        for (int u = 0; u < L + 2; ++u) {
            // unpack(u) is ordered just ahead of the first stage that needs unit u (layer u - 1): see ComputeScheduler
            Task* ld = g.add("load", u - 1, -1, Lane::IO, read_rank[u], [source, u] { source->load(u); });
            Task* up = g.add("unpack", u - 1, -1, Lane::Unpack, prio(u - 1, 0, 0) - 1,
                             [source, u, &model, pool] { source->unpack(u, model, *pool); });
            TaskGraph::depend(ld, up);
            unpacked[u] = up;
        }
    }
    std::vector<Task*> last(n_chunks, nullptr);       // latest stage of each chunk
    std::vector<Task*> prev_attn(n_chunks, nullptr);  // attention(l, c) per chunk of the current layer
    for (int c = 0; c < n_chunks; ++c) {
        ChunkState* s = &chunks[c];
        last[c] = g.add("embed", -1, c, stage_lane(policy, "embed"), prio(-1, c, 0), [&fwd, s] { fwd.embed(*s); });
        TaskGraph::depend(unpacked[0], last[c]);
    }
    // llm.npu runs two adjacent chunks in parallel: chunk c enters layer l once chunk c - 2 has left it.
    std::vector<Task*> layer_done(n_chunks, nullptr);  // down(l, c) of the current layer
    for (int l = 0; l < L; ++l) {
        for (int c = 0; c < n_chunks; ++c) {
            ChunkState* s = &chunks[c];
            auto stage = [&](const char* name, int k, std::function<void()> fn) {
                Task* t = g.add(name, l, c, stage_lane(policy, name), prio(l, c, k), std::move(fn));
                TaskGraph::depend(last[c], t);
                last[c] = t;
                return t;
            };
            Task* first = stage("attn_in", 0, [&fwd, l, s] { fwd.attn_in(l, *s); });
            TaskGraph::depend(unpacked[l + 1], first);
            if (policy == Policy::LlmNpuStatic && c >= 2) TaskGraph::depend(layer_done[c - 2], first);
            stage("qkv", 1, [&fwd, l, s] { fwd.qkv(l, *s); });
            Task* attn = stage("attention", 2, [&fwd, l, s] { fwd.attention(l, *s); });
            if (c > 0) TaskGraph::depend(prev_attn[c - 1], attn);
            prev_attn[c] = attn;
            stage("o_proj", 3, [&fwd, l, s] { fwd.o_proj(l, *s); });
            stage("ffn_in", 4, [&fwd, l, s] { fwd.ffn_in(l, *s); });
            stage("gate_up", 5, [&fwd, l, s] { fwd.gate_up(l, *s); });
            stage("swiglu", 6, [&fwd, l, s] { fwd.swiglu(l, *s); });
            layer_done[c] = stage("down", 7, [&fwd, l, s] { fwd.down(l, *s); });
        }
    }
    const int first_logit = n_tok - std::clamp(opt.logit_rows, 1, n_tok);  // the rows that get logits are a suffix
    for (int c = 0; c < n_chunks; ++c) {
        ChunkState* s = &chunks[c];
        const int rows = std::min(s->T, c * chunk_len + s->T - first_logit);  // this chunk's share of that suffix
        if (rows <= 0) continue;
        Task* h = g.add("head", L, c, stage_lane(policy, "head"), prio(L, c, 0), [&fwd, s, rows] { fwd.head(*s, rows); });
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
