#include "engine.h"

#include <algorithm>

namespace edgeflow {

void EngineOptions::validate() const {
    if (threads <= 0) throw EngineError("threads must be at least 1 (got " + std::to_string(threads) + ")");
    if (io_threads <= 0) throw EngineError("I/O threads must be at least 1 (got " + std::to_string(io_threads) + ")");
    if (ctx < 0) throw EngineError("context length must not be negative");
    if (chunk <= 0) throw EngineError("chunk size must be at least 1 (got " + std::to_string(chunk) + ")");
    sched();
}

SchedOptions EngineOptions::sched() const {
    SchedOptions s;
    s.threads = threads;
    s.accel_threads = accel_threads;
    s.policy = parse_policy(policy);
    s.steal_threshold = steal_threshold;
    s.lane_help = lane_help;
    s.validate();
    return s;
}

Engine::Engine(std::unique_ptr<WeightSource> source, EngineOptions opt) : source_(std::move(source)), opt_(opt) {
    opt_.validate();
    io_mode_ = source_->io_mode();
    model_.cfg = source_->config();
    model_.cfg.validate();
    ex_ = std::make_unique<Executors>(opt_.sched(), opt_.io_threads, &trace_);
}

Engine::Engine(Model model, EngineOptions opt) : model_(std::move(model)), opt_(opt) {
    opt_.validate();
    model_.cfg.validate();
    ex_ = std::make_unique<Executors>(opt_.sched(), opt_.io_threads, &trace_);
}

Engine::~Engine() = default;

void Engine::set_schedule(const std::string& policy, int accel_threads, int steal_threshold, bool lane_help) {
    EngineOptions o = opt_;
    o.policy = policy;
    o.accel_threads = accel_threads;
    o.steal_threshold = steal_threshold;
    o.lane_help = lane_help;
    o.validate();  // before anything changes
    opt_ = o;
    ex_ = std::make_unique<Executors>(opt_.sched(), opt_.io_threads, &trace_);
}

const char* Engine::gemm_kernel() const { return best_gemm_kernel().name; }

const char* Engine::numerics() const {
    return !model_.layers.empty() && model_.layers[0].q.requantized() ? "requantized" : "float-outputs";
}

int Engine::a16_linears() const {
    int n = 0;
    for (const auto& L : model_.layers)
        for (const QLinear* q : {&L.q, &L.k, &L.v, &L.o, &L.gate, &L.up, &L.down}) n += q->act_bits == 16;
    return n;
}

std::vector<float> Engine::prefill(const std::vector<int32_t>& tokens, int logit_rows, int reserve) {
    const int limit = opt_.ctx > 0 ? opt_.ctx : model_.cfg.max_positions;
    const int need = int(tokens.size()) + std::max(0, reserve);
    if (need > limit)
        throw EngineError("prompt of " + std::to_string(tokens.size()) + " tokens" +
                          (reserve > 0 ? " plus " + std::to_string(reserve) + " new tokens" : std::string()) +
                          " exceeds the context length " + std::to_string(limit));
    cache_.init(model_.cfg, need);
    decode_fwd_.reset();  // its RoPE tables were sized for the old cache
    return run(0, tokens, logit_rows);
}

void Engine::check_keep(int keep) const {
    if (keep < 1 || keep > n_past_)
        throw EngineError("cannot keep " + std::to_string(keep) + " positions of a sequence of " +
                          std::to_string(n_past_));
}

std::vector<float> Engine::extend(int keep, const std::vector<int32_t>& tokens, int last) {
    check_keep(keep);
    if (keep + int(tokens.size()) > cache_.ctx)
        throw EngineError(std::to_string(keep) + " kept positions plus " + std::to_string(tokens.size()) +
                          " tokens exceed the cache of " + std::to_string(cache_.ctx) +
                          " the prefill sized (give it a larger reserve)");
    return run(keep, tokens, last);
}

std::vector<float> Engine::extend_branches(int keep, const std::vector<int32_t>& tokens,
                                           const std::vector<int>& lengths) {
    check_keep(keep);
    if (lengths.empty()) throw EngineError("no branches given");
    auto logits = run(keep, tokens, int(tokens.size()), lengths);  // run_prefill checks the lengths and the cache
    n_past_ = keep;  // the cache's later positions hold the last branch only
    return logits;
}

std::vector<float> Engine::run(int start, const std::vector<int32_t>& tokens, int logit_rows,
                               const std::vector<int>& branches) {
    PrefillOptions po;
    po.chunk = opt_.chunk;
    po.start = start;
    po.logit_rows = logit_rows;
    po.branches = branches;
    po.policy = ex_->compute->options().policy;
    ex_->compute->reset_stats();
    n_past_ = start;  // what the cache holds if this run fails
    prefill_t0_ = now_s();
    auto chunks = run_prefill(model_, source_.get(), cache_, *ex_, tokens, po);
    prefill_t1_ = now_s();
    prefill_stats_.push_back({prefill_t1_ - prefill_t0_, prefill_t0_, prefill_t1_, ex_->compute->stats()});
    if (source_) {  // weights are resident now; later prefills run from memory
        bytes_read_after_load_ = source_->bytes_read();
        source_.reset();
    }
    n_past_ = start + int(tokens.size());
    if (logit_rows <= 1) return std::move(chunks.back().logits);
    std::vector<float> out;
    out.reserve(size_t(std::min<int>(logit_rows, tokens.size())) * model_.cfg.vocab);
    for (auto& c : chunks) out.insert(out.end(), c.logits.begin(), c.logits.end());  // chunks without a head: empty
    return out;
}

int32_t Engine::decode_step(int32_t token) {
    if (n_past_ == 0) throw EngineError("decode needs a prefill first");
    if (n_past_ >= cache_.ctx) throw EngineError("the context is full (" + std::to_string(cache_.ctx) + " tokens)");
    // The prefill's compute threads sleep meanwhile, so the decode pool's threads plus this one stay within the
    // thread budget.
    if (!decode_pool_) decode_pool_ = std::make_unique<ThreadPool>(opt_.threads);
    if (!decode_fwd_) decode_fwd_ = std::make_unique<Forward>(model_, cache_, *decode_pool_, *decode_pool_);
    ChunkState s;
    s.init(model_.cfg, n_past_, &token, 1);
    decode_fwd_->run_chunk(s, false);
    ++n_past_;
    return argmax(s.logits.data(), model_.cfg.vocab);
}

int32_t argmax(const float* x, int n) { return int32_t(std::max_element(x, x + n) - x); }

TtftBreakdown breakdown(const std::vector<TraceEvent>& events, double t0, double t1) {
    TtftBreakdown b;
    // Sweep over event boundaries; at each instant the highest-ranked running activity gets the time.
    struct Edge {
        double t;
        int rank, delta;
    };
    std::vector<Edge> edges;
    for (const auto& e : events) {
        const double a = std::max(e.t0, t0), z = std::min(e.t1, t1);
        const double dur = e.t1 - e.t0;
        int rank;
        if (e.cat == "unpack") rank = 0, b.unpack_busy_s += dur;
        else if (e.cat == "io") rank = 1, b.io_busy_s += dur;
        else if (e.cat == "cpu") rank = 2, b.cpu_busy_s += dur;
        else rank = 2, b.accel_busy_s += dur;
        if (z > a) {
            edges.push_back({a, rank, +1});
            edges.push_back({z, rank, -1});
        }
    }
    std::sort(edges.begin(), edges.end(), [](const Edge& x, const Edge& y) { return x.t < y.t; });
    int running[3] = {0, 0, 0};
    double t = t0;
    for (const auto& e : edges) {
        const double dt = e.t - t;
        if (running[2] > 0) b.compute_s += dt;
        else if (running[1] > 0) b.io_s += dt;
        else if (running[0] > 0) b.unpack_s += dt;
        else b.idle_s += dt;
        running[e.rank] += e.delta;
        t = e.t;
    }
    b.idle_s += t1 - t;
    return b;
}

}  // namespace edgeflow
