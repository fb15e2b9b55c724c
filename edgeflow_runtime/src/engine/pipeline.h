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
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

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
    virtual void unpack(int unit, Model& model) = 0;
    virtual uint64_t bytes_read() const = 0;
    // Called once when any task of the prefill fails: a load() blocked on unpacking must give up (throw).
    virtual void cancel() {}
};

struct PrefillOptions {
    int chunk = 128;        // prompt tokens per chunk
    bool all_logits = false;  // logits of every position (scoring) instead of the last one only
};

// The executors of one engine instance: io and unpack lanes plus the CPU and accelerator executors.
struct Executors {
    Executors(int threads, int io_threads, int unpack_threads, Trace* trace);
    std::unique_ptr<QueueExecutor> io, unpack;
    std::unique_ptr<CpuExecutor> cpu;
    std::unique_ptr<AcceleratorEmulator> accel;
    void lanes(Executor* out[kNumLanes]) const;
};

// Runs the prompt through the model, loading the weights from `source` on the way when it is not null (else the
// model must already be complete). Returns one ChunkState per chunk; the last one holds the logits.
std::vector<ChunkState> run_prefill(Model& model, WeightSource* source, KvCache& cache, Executors& ex,
                                    const std::vector<int32_t>& tokens, const PrefillOptions& opt);

}  // namespace edgeflow
