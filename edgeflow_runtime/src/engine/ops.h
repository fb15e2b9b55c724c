// The CPU operators of the forward pass (docs/quantized-artifact.md): activation quantization and dequantization
// around the INT8 matmuls, RMSNorm, rotate-half RoPE, grouped-query causal attention, SwiGLU, and the weight-only
// INT8 embedding and LM head. Everything in float32; rows are tokens, shapes are given as [rows, columns].
#pragma once
#include <cstdint>

namespace edgeflow {

// xq[t, k] = clamp(round_half_even(x[t, k] * m[k]), -127, 127); x [T, K] float, m [K] (= in_scale / act_scale).
void quantize_rows(int T, int K, const float* x, const float* m, int8_t* xq);

// y[t, c] = float(acc[t, c]) * scale[c]  (scale[c] = act_scale * w_scale[c]); acc [T, ldacc] int32, y [T, C].
void dequantize_rows(int T, int C, const int32_t* acc, int ldacc, const float* scale, float* y);

// As dequantize_rows but adds into y: the residual add after o_proj and down_proj.
void dequantize_add_rows(int T, int C, const int32_t* acc, int ldacc, const float* scale, float* y);

// y[t] = x[t] * rsqrt(mean(x[t]^2) + eps) * w; x, y [T, H].
void rmsnorm_rows(int T, int H, const float* x, const float* w, float eps, float* y);

// Rotary tables for positions [0, n_pos): cos/sin [n_pos, head_dim / 2], Hugging Face inv_freq convention.
void rope_tables(int n_pos, int head_dim, float theta, float* cos_out, float* sin_out);

// Rotate-half RoPE in place on x [T, n_heads * head_dim] for tokens at positions pos0 .. pos0 + T - 1.
void rope_rows(int T, int n_heads, int head_dim, int pos0, const float* cos_tab, const float* sin_tab, float* x);

// Causal attention of one query head for T query tokens at positions pos0.. against cached keys/values at
// positions [0, pos0 + T). Row t of q/out starts at q + t * q_stride; cached row j at k + j * kv_stride (the caller
// offsets k and v to the head's KV group: grouped-query attention). scratch >= pos0 + T floats.
void attention_head(int T, int pos0, int d, const float* q, int q_stride, const float* k, const float* v,
                    int kv_stride, float* out, float* scratch);

// g[i] = silu(g[i]) * u[i] for n values.
void silu_mul(int n, float* g, const float* u);

// Embedding lookup: x[t] = codes[tok[t]] * w_scale[tok[t]]; codes [V, H] int8.
void embed_rows(int T, int H, const int32_t* tokens, const int8_t* codes, const float* w_scale, float* x);

// Weight-only INT8 LM head for vocabulary rows [v0, v1): logits[t, v] = w_scale[v] * sum_k h[t, k] * codes[v, k].
// h [T, H], logits [T, V] (only columns v0..v1 written).
void lm_head_rows(int T, int H, int V, int v0, int v1, const float* h, const int8_t* codes, const float* w_scale,
                  float* logits);

}  // namespace edgeflow
