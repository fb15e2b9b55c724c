/* C ABI of the EdgeFlow inference engine, in libedgeflow.so beside the file reader (c_api.h), for the Python harness
 * (ctypes). Same error convention: functions that can fail return 0, or -1 (NULL for a handle), and ef_last_error()
 * then names the problem; no function throws or aborts on bad input. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "edgeflow/c_api.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ef_engine ef_engine;

/* The model's hyper-parameters, field for field as harness/models/arch.py FIELDS (Hugging Face LlamaConfig names). */
typedef struct {
  int32_t hidden_size, intermediate_size, num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim;
  int32_t vocab_size, max_position_embeddings, tie_word_embeddings;
  float rms_norm_eps, rope_theta;
} ef_config;

/* sizeof(ef_config), and offsetof(ef_config, field) or -1 for an unknown field: the harness checks its ctypes mirror. */
uint64_t ef_config_size(void);
int64_t ef_config_offset(const char* field);

/* An engine over a packed model file (docs/format.md); weights load during the first prefill. */
ef_engine* ef_engine_open(const char* path, int32_t threads, int32_t ctx, int32_t chunk);

/* An engine with an empty model whose tensors the caller sets one by one with ef_engine_set_tensor, named and
 * shaped as in the quantized artifact (docs/quantized-artifact.md), e.g. "model.layers.0.self_attn.q_proj.codes". */
ef_engine* ef_engine_new(const ef_config* cfg, int32_t threads, int32_t ctx, int32_t chunk);

/* The pipeline's scheduling (edgeflow-run --policy etc.): policy "llmnpu-static" | "place" | "place+priority" |
 * "place+priority+steal" (NULL: the default, the last), accel_threads = the accelerator lane's share of the engine's
 * threads (0: threads / 2), steal_threshold >= 0, lane_help 0/1. Call before a score or between scores. */
int ef_engine_set_schedule(ef_engine* e, const char* policy, int32_t accel_threads, int32_t steal_threshold,
                           int32_t lane_help);

/* dtype: "int8", "uint8" or "float32"; data is C-contiguous with the given shape (ndim 0 for a scalar). */
int ef_engine_set_tensor(ef_engine* e, const char* name, const char* dtype, const int64_t* shape, int32_t ndim,
                         const void* data);

/* Logits of every position of a fresh sequence: logits_out [n, vocab_size] float32. */
int ef_engine_score(ef_engine* e, const int32_t* tokens, int32_t n, float* logits_out);

/* Scoring that shares a prefix, and only the rows a request needs. keep = 0: a fresh sequence of n tokens whose KV
 * cache has room for `reserve` more. keep > 0: the last sequence's first `keep` positions are kept (keep <= its
 * length) and the n tokens run at positions keep .. keep + n - 1 (keep + n <= the fresh sequence's n + reserve).
 * logits_out [last, vocab_size] float32 (1 <= last <= n): the logits after the last `last` of the n tokens, equal to
 * the matching rows of ef_engine_score over the kept tokens followed by these. */
int ef_engine_score_after(ef_engine* e, int32_t keep, const int32_t* tokens, int32_t n, int32_t reserve,
                          int32_t last, float* logits_out);

/* Sibling continuations of the last sequence's first `keep` positions in one pass (the endings of a multiple-choice
 * item): tokens holds n_branches branches one after another, lengths[i] tokens each; every branch runs at positions
 * keep .. keep + lengths[i] - 1 and sees only the kept positions and its own tokens (keep + the longest branch <= the
 * fresh sequence's n + reserve). logits_out [sum of lengths, vocab_size] float32: the logits after every token of
 * every branch, equal to what ef_engine_score_after(keep, branch, ..., last = its length) gives each branch alone.
 * Afterwards the sequence is its first `keep` positions. */
int ef_engine_score_branches(ef_engine* e, int32_t keep, const int32_t* tokens, const int32_t* lengths,
                             int32_t n_branches, float* logits_out);

int32_t ef_engine_vocab_size(const ef_engine* e);
const char* ef_engine_gemm_kernel(void); /* "avx2", "neon-sdot", ... */
void ef_engine_free(ef_engine* e);

/* One linear as the accelerator lane computes it, outside any model: xq = quantize(x * in_scale / act_scale) at
 * act_bits (8 or 16), the integer matmul with this CPU's kernel, the sums requantized to the output grid out_step [C]
 * as an NPU gives them (NULL: float outputs, act_bits 8 only), y = what the CPU side dequantizes. x [T, K] float32,
 * codes [C, K] int8, w_scale [C], in_scale [K], y [T, C] float32 (docs/quantized-artifact.md). */
int ef_accel_linear(int32_t T, int32_t C, int32_t K, const float* x, const int8_t* codes, const float* w_scale,
                    const float* in_scale, float act_scale, const float* out_step, int32_t act_bits, float* y);

/* An in-memory engine, before its first score: on != 0 ignores the linears' output grids (float outputs, the CPU-only
 * lane that no NPU computes). */
int ef_engine_set_float_outputs(ef_engine* e, int32_t on);

#ifdef __cplusplus
}
#endif
