// The forward pass cut into the operator stages that the pipeline schedules (paper Appendix B): every INT8 matmul
// is an accelerator stage; norms, (de)quantization, RoPE, attention, SwiGLU and residual adds are CPU stages.
// Stages of one chunk run strictly in order, so each chunk owns one set of working buffers (ChunkState).
#pragma once
#include <cstdint>
#include <initializer_list>
#include <utility>
#include <vector>

#include "attention.h"
#include "gemm.h"
#include "gemm16.h"
#include "model.h"
#include "ops.h"
#include "thread_pool.h"

namespace edgeflow {

// Keys and values of every layer for positions [0, ctx): k, v [n_layers, ctx, kv_dim] float32.
struct KvCache {
    int ctx = 0, kv_dim = 0;
    std::vector<float> k, v;
    void init(const LlamaConfig& cfg, int ctx_len);
    float* k_at(int layer, int pos) { return k.data() + (size_t(layer) * ctx + pos) * kv_dim; }
    float* v_at(int layer, int pos) { return v.data() + (size_t(layer) * ctx + pos) * kv_dim; }
};

// Working memory of one chunk of T tokens at positions pos0 .. pos0 + T - 1.
//   x    [T, H]  residual stream             h  [T, max(H, q_dim)]  normed input / attention output
//   q    [T, q_dim] (after RoPE)
//   (k and v go straight into the KV cache; gate and up are consumed row by row, swiglu_quantize_rows)
//   xq0..2 [T, max(H, I, q_dim)] inputs of the matmuls: int8 codes, or int16 (2 bytes each) for an A16 linear
//   acc0..2 int32 outputs, same shape: the integer sums, or the output codes of a requantized linear (QLinear)
// Matmul outputs: q,k,v -> acc0,1,2; o -> acc0; gate,up -> acc1,2; down -> acc0 (consumed by the next layer).
struct ChunkState {
    int pos0 = 0, T = 0;
    std::vector<int32_t> tokens;
    std::vector<float> x, h, q;
    std::vector<int8_t> xq0, xq1, xq2;
    std::vector<int32_t> acc0, acc1, acc2;
    std::vector<float> logits;  // [rows, V] after the head stage
    int logit_rows = 0;         // 1 (last position) or T (every position)
    // Empty: the T rows are one causal sequence at positions pos0... Otherwise the rows are sibling branches of these
    // lengths (summing to T), each at positions pos0.. and attending to the cache's positions < pos0 and its own rows:
    // the endings of a multiple-choice item after their shared context, every linear run once for all of them.
    std::vector<int> branches;
    void init(const LlamaConfig& cfg, int pos0, const int32_t* toks, int n);
};

// The accelerator lane's matmul of one linear over `pool`: acc [T, C] int32 gets the sums (float outputs) or the
// output codes (a requantized linear); xq [T, K] holds int8 codes, or int16 ones for an A16 linear.
void accel_matmul(ThreadPool& pool, const GemmKernel& k8, const Gemm16Kernel& k16, const int8_t* xq, int T,
                  const QLinear& w, int32_t* acc);

// Runs the stages against a model and a KV cache. cpu and accel are the thread pools of the two executors.
class Forward {
public:
    Forward(const Model& model, KvCache& cache, ThreadPool& cpu, ThreadPool& accel);

    // CPU stages
    void embed(ChunkState& s) const;
    void attn_in(int layer, ChunkState& s) const;    // [+ previous down] residual, RMSNorm, quantize for q/k/v
    void attention(int layer, ChunkState& s) const;  // dequantize, RoPE, KV append, attention, quantize for o
    void ffn_in(int layer, ChunkState& s) const;     // + o residual, RMSNorm, quantize for gate/up
    void swiglu(int layer, ChunkState& s) const;     // dequantize, silu(g) * u, quantize for down
    void head(ChunkState& s, int rows) const;        // + last down residual, final norm, LM head of the last rows
    // Accelerator stages (INT8 matmuls)
    void qkv(int layer, ChunkState& s) const;
    void o_proj(int layer, ChunkState& s) const;
    void gate_up(int layer, ChunkState& s) const;
    void down(int layer, ChunkState& s) const;

    // All stages of all layers in order for one chunk (decode and the synchronous scoring path).
    void run_chunk(ChunkState& s, bool all_rows) const;

    const GemmKernel& kernel() const { return kernel_; }

private:
    void residual_norm_quantize(ChunkState& s, const QLinear* pending, const std::vector<float>& norm,
                                std::initializer_list<std::pair<const QLinear*, int8_t*>> outs) const;
    void matmul(const int8_t* xq, int T, const QLinear& w, int32_t* acc) const;
    void attend(int layer, ChunkState& s, int r0, int n) const;  // rows [r0, r0 + n) at positions pos0..

    const Model& model_;
    KvCache& cache_;
    ThreadPool& cpu_;
    ThreadPool& accel_;
    const GemmKernel& kernel_;
    const Gemm16Kernel& kernel16_;  // A16 linears
    const AttentionKernel& attention_;         // prefill chunks
    const AttentionKernel& decode_attention_;  // T = 1
    const LmHeadKernel& lm_head_;
    std::vector<float> rope_cos_, rope_sin_;  // [ctx, head_dim / 2]
};

}  // namespace edgeflow
