// One engine instance: a model (loaded from a WeightSource during the first prefill, or filled in memory), its
// executors, the KV cache, and the prefill / decode / scoring entry points used by edgeflow-run and the C ABI.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "defaults.h"
#include "pipeline.h"

namespace edgeflow {

struct EngineOptions {
    int threads = defaults::kThreads;  // compute threads of the whole engine (CPU, accelerator and unpack lanes): see SchedOptions
    int accel_threads = 0;   // the accelerator lane's share of `threads` (0 = threads / 2; see SchedOptions)
    std::string policy = defaults::kPolicy;  // llmnpu-static | place | place+priority | place+priority+steal
    int steal_threshold = defaults::kStealThreshold;  // steal only when the accelerator queue holds more tasks than this
    bool lane_help = true;    // idle threads help the other lane's data-parallel jobs
    int io_threads = 1;      // I/O threads reading the model file (blocked in pread; their CPU time is reported)
    int ctx = 0;         // context length limit (prompt + generated tokens); 0 = the model's max_position_embeddings
    int chunk = defaults::kChunk;  // prefill chunk size in tokens
    void validate() const;
    SchedOptions sched() const;  // validated
};

// Per-thread time accounting of one prefill's compute lanes (ComputeScheduler::stats over the prefill's span).
struct PrefillStats {
    double span_s = 0;
    double t0 = 0, t1 = 0;  // now_s() clock
    std::vector<WorkerStats> workers;
};

// Where the time to first token went, from the task trace. The pipeline's wall time is split by what was running
// at each instant, compute taking precedence over I/O over unpacking; what is left is idle (waiting on nothing
// traced: thread hand-offs, the critical path's gaps). The parts add up to the pipeline's wall time. I/O outranks
// unpacking because a layer is unpacked only once read: while both run, the reads set the pace, so unpacking counts
// as exposed only when it runs alone (a 1.8B model at 200 MB/s: 2.75 s of unpacking, 0.24 s of it exposed, under
// 7.3 s of reads; the other order called 2.5 s of it exposed preparation).
struct TtftBreakdown {
    double io_s = 0, unpack_s = 0, compute_s = 0, idle_s = 0;
    double io_busy_s = 0, unpack_busy_s = 0, cpu_busy_s = 0, accel_busy_s = 0;  // summed task times per lane
};
TtftBreakdown breakdown(const std::vector<TraceEvent>& events, double t0, double t1);

class Engine {
public:
    Engine(std::unique_ptr<WeightSource> source, EngineOptions opt);  // weights load during the first prefill
    Engine(Model model, EngineOptions opt);                           // weights already in memory
    ~Engine();

    const LlamaConfig& config() const { return model_.cfg; }
    Model& model() { return model_; }
    const Trace& trace() const { return trace_; }
    const char* gemm_kernel() const;
    // "requantized" (the accelerator lane gives output codes, as an NPU does) or "float-outputs"; and how many
    // linears take 16-bit activations. Meaningful once the weights are loaded.
    const char* numerics() const;
    int a16_linears() const;

    // Prefill of a fresh sequence (clears the KV cache). reserve = extra positions kept for decoding or extend().
    // Returns the logits of the last `logit_rows` positions ([logit_rows, V]; 1 for generation, n for scoring).
    std::vector<float> prefill(const std::vector<int32_t>& tokens, int logit_rows, int reserve);
    // Continues the last sequence after its first `keep` positions (keep <= the positions it holds; later ones are
    // dropped): `tokens` run at positions keep.. through the same pipeline, within the cache the prefill sized
    // (its tokens + reserve). Row for row what a fresh prefill of the kept prefix + tokens computes, so requests
    // that share a prefix (lm-eval's multiple-choice endings) score it once.
    // Returns the logits of the last `last` new positions ([last, V]): a scorer needs only the continuation's.
    std::vector<float> extend(int keep, const std::vector<int32_t>& tokens, int last);
    // Sibling continuations of the first `keep` positions in one pass: `tokens` holds the branches one after another
    // (`lengths` tokens each), every branch at positions keep.. and seeing only the kept prefix and its own tokens
    // (every linear runs once for all of them). Returns the logits of every row ([tokens, V]), row for row what
    // extend(keep, branch, its length) gives each branch alone; afterwards the sequence is the kept prefix.
    std::vector<float> extend_branches(int keep, const std::vector<int32_t>& tokens, const std::vector<int>& lengths);
    // One greedy decode step after prefill: feeds `token` at the next position, returns the argmax of its logits.
    // Runs on the calling thread and the engine's decode pool (threads - 1 more), not through the prefill's task
    // graph: one token is ~12 short data-parallel jobs per layer, which the lanes' scheduling only slows down.
    int32_t decode_step(int32_t token);

    uint64_t bytes_read() const { return source_ ? source_->bytes_read() : bytes_read_after_load_; }
    double prefill_start_s() const { return prefill_t0_; }
    double prefill_end_s() const { return prefill_t1_; }
    const std::vector<PrefillStats>& prefill_stats() const { return prefill_stats_; }  // one per prefill() call
    const SchedOptions& sched() const { return ex_->compute->options(); }
    double io_cpu_s() const { return ex_->io->cpu_s(); }  // CPU time of the I/O threads' reads so far
    const std::string& io_mode() const { return io_mode_; }  // the weight source's reads (WeightSource::io_mode)
    // Changes the policy, lane split, steal threshold and lane help (threads stay); between prefills only.
    void set_schedule(const std::string& policy, int accel_threads, int steal_threshold, bool lane_help);

private:
    void check_keep(int keep) const;  // 1 <= keep <= the positions the last sequence holds
    std::vector<float> run(int start, const std::vector<int32_t>& tokens, int logit_rows,
                           const std::vector<int>& branches = {});

    std::unique_ptr<WeightSource> source_;  // released after the weights are loaded
    uint64_t bytes_read_after_load_ = 0;
    std::string io_mode_ = "none (weights in memory)";
    Model model_;
    EngineOptions opt_;
    Trace trace_;
    std::unique_ptr<Executors> ex_;
    std::unique_ptr<ThreadPool> decode_pool_;  // made at the first decode step: the compute threads' budget
    std::unique_ptr<Forward> decode_fwd_;      // over decode_pool_ and the KV cache of the last prefill (its RoPE
                                               // tables cover the cache), made at that prefill's first decode step
    KvCache cache_;
    int n_past_ = 0;
    double prefill_t0_ = 0, prefill_t1_ = 0;
    std::vector<PrefillStats> prefill_stats_;
};

int32_t argmax(const float* x, int n);

}  // namespace edgeflow
