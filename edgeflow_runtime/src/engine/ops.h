// The CPU operators of the forward pass (docs/quantized-artifact.md): activation quantization and dequantization
// around the INT8 matmuls, RMSNorm, rotate-half RoPE, SwiGLU, and the weight-only
// INT8 embedding and LM head. Everything in float32; rows are tokens, shapes are given as [rows, columns].
#pragma once
#include <cstdint>
#include <vector>

namespace edgeflow {

// xq[t, k] = clamp(round_half_even(x[t, k] * m[k]), -127, 127); x [T, K] float, m [K] (= in_scale / act_scale).
void quantize_rows(int T, int K, const float* x, const float* m, int8_t* xq);

// As quantize_rows at 16 bits (A16): xq[t, k] = clamp(round_half_even(x[t, k] * m[k]), -32767, 32767).
void quantize_rows16(int T, int K, const float* x, const float* m, int16_t* xq);

// The quantize_rows of a linear's width: int8 codes, or int16 ones (act_bits 16) at xq's bytes reinterpreted.
void quantize_rows_bits(int bits, int T, int K, const float* x, const float* m, void* xq);

// The accelerator lane's output codes (docs/quantized-artifact.md, "Requantized outputs"): for exact sums acc
// [T, ldacc] (int32 or int64), y[t, c] = clamp(round_half_even(double(acc[t, c]) * ratio[c]), -qmax - 1, qmax);
// y [T, ldy] int32 may be acc itself (int32).
void requantize_rows(int T, int C, const int32_t* acc, int ldacc, const double* ratio, int qmax, int32_t* y, int ldy);
void requantize_rows(int T, int C, const int64_t* acc, int ldacc, const double* ratio, int qmax, int32_t* y, int ldy);

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

// dequantize_rows then rope_rows fused: y [T, n_heads * head_dim] = RoPE(float(acc) * scale) for tokens at positions
// pos0 .. pos0 + T - 1 (bit-identical to the two passes; y may be a KV-cache slice).
void dequantize_rope_rows(int T, int n_heads, int head_dim, int pos0, const int32_t* acc, int ldacc,
                          const float* scale, const float* cos_tab, const float* sin_tab, float* y);

// Attention: attention.h.

// g[i] = silu(g[i]) * u[i] for n values.
void silu_mul(int n, float* g, const float* u);

// The SwiGLU stage between gate/up and down, one token row at a time so that each row's floats stay in L1 across
// the passes: g = dequantize(acc_g), u = dequantize(acc_u), g = silu(g) * u, xq = quantize(g, m). acc_g, acc_u
// [T, ldacc] int32, xq [T, I]; scratch >= 2 * I floats. Bit-identical to the four whole-array passes.
void swiglu_quantize_rows(int T, int I, const int32_t* acc_g, const int32_t* acc_u, int ldacc, const float* scale_g,
                          const float* scale_u, const float* m, int8_t* xq, float* scratch);
// The same with down_proj's input at `bits` (quantize_rows_bits: int16 codes at 16).
void swiglu_quantize_rows_bits(int bits, int T, int I, const int32_t* acc_g, const int32_t* acc_u, int ldacc,
                               const float* scale_g, const float* scale_u, const float* m, void* xq, float* scratch);

// Embedding lookup: x[t] = rows[t][0..H) * scales[t], rows[t] the int8 codes of token t's table row.
void embed_rows(int T, int H, const int8_t* const* rows, const float* scales, float* x);

// Weight-only INT8 LM head for vocabulary rows [v0, v1): logits[t, v] = w_scale[v] * sum_k h[t, k] * codes[v, k].
// h [T, H], logits [T, V] (only columns v0..v1 written). lm_head_rows runs lm_head_kernel().
void lm_head_rows(int T, int H, int V, int v0, int v1, const float* h, const int8_t* codes, const float* w_scale,
                  float* logits);
void lm_head_rows_portable(int T, int H, int V, int v0, int v1, const float* h, const int8_t* codes,
                           const float* w_scale, float* logits);

using LmHeadFn = void (*)(int T, int H, int V, int v0, int v1, const float* h, const int8_t* codes,
                          const float* w_scale, float* logits);
struct LmHeadKernel {
    const char* name;  // "portable" (auto-vectorized for the CPU's widest vectors), "avx2", "avx512"
    LmHeadFn fn;
};

// The LM head kernels this CPU can run, the best last: portable; avx2 (lm_head_avx2.cpp, AVX2 + FMA); avx512
// (lm_head_avx512.cpp, AVX-512 F/BW/VL).
std::vector<LmHeadKernel> lm_head_kernels();

// The last of lm_head_kernels(), or the one the environment variable EDGEFLOW_LM_HEAD names.
const LmHeadKernel& lm_head_kernel();

}  // namespace edgeflow
