// Cold-start prefill as a task graph: load and unpack each weight unit, and run every operator stage of every
// layer for every prompt chunk, with the dependencies that let loading, unpacking and compute of different layers
// overlap.
//
//   load(u) [io] -> unpack(u) [unpack]            u = 0 embeddings, 1 + i layer i, n + 1 final norm and LM head
//   embed(c) [cpu]                                 after unpack(0)
//   attn_in(l,c) [cpu] -> qkv [accel] -> attention [cpu] -> o_proj [accel] -> ffn_in [cpu] -> gate_up [accel]
//       -> swiglu [cpu] -> down [accel]            attn_in(l,c) after unpack(l) and down(l-1,c) (embed(c) at l = 0)
//   attention(l,c) after attention(l,c-1)          the KV cache of earlier chunks must be written first
//   head(c) [cpu]                                  after down(n-1,c) and unpack(n+1); last chunk only unless
//                                                  every row's logits are wanted
//   [lanes] are the placements of the place* policies; stage_lane() has each policy's. llmnpu-static also makes
//   attn_in(l,c) wait for down(l,c-2): two adjacent chunks in flight.
#pragma once
#include <cstdint>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "defaults.h"
#include "executor.h"
#include "forward.h"
#include "model.h"

namespace edgeflow {

// Where the weights come from, in n_layers + 2 units (the packed file's regions): unit 0 the embeddings, unit 1 + i
// layer i, unit n_layers + 1 the final norm and the LM head. load() does I/O only and runs on an I/O thread;
// unpack() turns what load() read into the Model's INT8/float tensors (and checks them) on the unpack executor.
// Different units may be loaded and unpacked concurrently.
class WeightSource {
public:
    virtual ~WeightSource() = default;
    virtual LlamaConfig config() const = 0;
    virtual void load(int unit) = 0;
    // The order the I/O lane reads units in (a permutation of 0 .. n_units - 1); default: file order.
    virtual std::vector<int> load_order(int n_units) const {
        std::vector<int> order(static_cast<size_t>(n_units));
        std::iota(order.begin(), order.end(), 0);
        return order;
    }
    // Runs as a task of the compute threads; `pool` (the CPU lane's) spreads the unit's work over the idle ones.
    virtual void unpack(int unit, Model& model, ThreadPool& pool) = 0;
    virtual uint64_t bytes_read() const = 0;
    virtual std::string io_mode() const { return "none (weights in memory)"; }  // how it reads, and why
    // The token ids the prefill will embed, told before any load(): a source may read only their embedding rows.
    virtual void expect_tokens(const std::vector<int32_t>& tokens) { (void)tokens; }
    // Called once when any task of the prefill fails: a load() blocked on unpacking must give up (throw).
    virtual void cancel() {}
};

struct PrefillOptions {
    int chunk = defaults::kChunk;  // prompt tokens per chunk
    int start = 0;          // position of the first token; the KV cache already holds positions 0 .. start - 1
    int logit_rows = 1;     // logits of the last logit_rows tokens: 1 = the next token's; all of them for scoring
    // Sibling continuations instead of one sequence: the tokens are branches of these lengths one after another,
    // each at positions start.. and attending only to positions < start and to its own tokens (ChunkState). They
    // run as one chunk; empty = one sequence.
    std::vector<int> branches;
    Policy policy = Policy::PlacePrioritySteal;  // placement, priorities and chunk window (stealing: the scheduler)
};

// The executors of one engine instance: the I/O lane (threads blocked in pread) and the compute scheduler, whose
// `threads` run the CPU, accelerator and unpack lanes (unpack tasks queue with the CPU lane's): the thread budget
// covers every thread that computes.
struct Executors {
    Executors(const SchedOptions& compute, int io_threads, Trace* trace);
    Executors(int threads, int io_threads, Trace* trace);  // default policy
    std::unique_ptr<QueueExecutor> io;
    std::unique_ptr<ComputeScheduler> compute;
    void lanes(Executor* out[kNumLanes]) const;
};

// The placement and priority of one operator stage under a policy; shared with the Python simulator
// (harness/pipeline_sim.py mirrors these rules: change both together).
//   stage: "embed", "attn_in", "qkv", "attention", "o_proj", "ffn_in", "gate_up", "swiglu", "down", "head"
Lane stage_lane(Policy policy, const std::string& stage);
long stage_priority(Policy policy, int layer, int chunk, int stage_index, int n_layers, int n_chunks);

// Runs the prompt through the model, loading the weights from `source` on the way when it is not null (else the
// model must already be complete). Returns one ChunkState per chunk; the last one holds the logits.
std::vector<ChunkState> run_prefill(Model& model, WeightSource* source, KvCache& cache, Executors& ex,
                                    const std::vector<int32_t>& tokens, const PrefillOptions& opt);

}  // namespace edgeflow
