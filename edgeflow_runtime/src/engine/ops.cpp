#include "ops.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "cpu_features.h"
#include "exp_approx.h"
#include "kernel_choice.h"
#include "vec_exp.h"
#include "vector_clones.h"

namespace edgeflow {

// xq = clamp(round_half_even(x * m), -qmax, qmax), qmax the code type's largest value (127, 32767). Inlined into
// each clone below, so that it vectorizes for the clone's ISA.
template <class Code>
__attribute__((always_inline)) inline void quantize_codes(int T, int K, const float* x, const float* m, Code* xq) {
    constexpr float qmax = float(std::numeric_limits<Code>::max());
    for (int t = 0; t < T; ++t)
        for (int k = 0; k < K; ++k) {
            float v = x[size_t(t) * K + k] * m[k];
            v = v > -qmax ? v : -qmax;  // written so that NaN maps to -qmax instead of an undefined cast
            v = v < qmax ? v : qmax;
            xq[size_t(t) * K + k] = Code(std::nearbyint(v));  // default rounding mode: round half to even
        }
}

EF_VECTOR_CLONES
void quantize_rows(int T, int K, const float* x, const float* m, int8_t* xq) {
    quantize_codes(T, K, x, m, xq);
}

EF_VECTOR_CLONES
void quantize_rows16(int T, int K, const float* x, const float* m, int16_t* xq) {
    quantize_codes(T, K, x, m, xq);
}

void quantize_rows_bits(int bits, int T, int K, const float* x, const float* m, void* xq) {
    if (bits == 16) return quantize_rows16(T, K, x, m, static_cast<int16_t*>(xq));
    quantize_rows(T, K, x, m, static_cast<int8_t*>(xq));
}

// Rounding half to even without a libm call, so that the loop vectorizes: for |v| <= 2^51, (v + 1.5 * 2^52) - 1.5 *
// 2^52 rounds v to an integer in the default rounding mode (the sum's ulp is 1). v is clamped to the code range
// first (the same codes: the bounds are integers), which also keeps it in range and puts an operation between the
// product and the add, so that no FMA contraction (-ffp-contract=fast) can fuse them and round once instead of twice.
static constexpr double kRoundMagic = 6755399441055744.0;  // 1.5 * 2^52

// Inlined into each clone below, so that it vectorizes for the clone's ISA.
template <class Acc>
__attribute__((always_inline)) inline void requantize(int T, int C, const Acc* acc, int ldacc, const double* ratio,
                                                      int qmax, int32_t* y, int ldy) {
    const double lo = -double(qmax) - 1, hi = double(qmax);
    for (int t = 0; t < T; ++t) {
        const Acc* a = acc + size_t(t) * ldacc;
        int32_t* out = y + size_t(t) * ldy;
        for (int c = 0; c < C; ++c) {
            double v = double(a[c]) * ratio[c];
            v = v > lo ? v : lo;
            v = v < hi ? v : hi;
            out[c] = int32_t((v + kRoundMagic) - kRoundMagic);
        }
    }
}

EF_VECTOR_CLONES
void requantize_rows(int T, int C, const int32_t* acc, int ldacc, const double* ratio, int qmax, int32_t* y, int ldy) {
    requantize(T, C, acc, ldacc, ratio, qmax, y, ldy);
}

EF_VECTOR_CLONES
void requantize_rows(int T, int C, const int64_t* acc, int ldacc, const double* ratio, int qmax, int32_t* y, int ldy) {
    requantize(T, C, acc, ldacc, ratio, qmax, y, ldy);
}

EF_VECTOR_CLONES
void dequantize_rows(int T, int C, const int32_t* acc, int ldacc, const float* scale, float* y) {
    for (int t = 0; t < T; ++t)
        for (int c = 0; c < C; ++c) y[t * C + c] = float(acc[t * ldacc + c]) * scale[c];
}

EF_VECTOR_CLONES
void dequantize_add_rows(int T, int C, const int32_t* acc, int ldacc, const float* scale, float* y) {
    for (int t = 0; t < T; ++t)
        for (int c = 0; c < C; ++c) y[t * C + c] += float(acc[t * ldacc + c]) * scale[c];
}

EF_VECTOR_CLONES
void rmsnorm_rows(int T, int H, const float* x, const float* w, float eps, float* y) {
    for (int t = 0; t < T; ++t) {
        const float* xr = x + t * H;
        float ss = 0.f;
#pragma omp simd reduction(+ : ss)
        for (int i = 0; i < H; ++i) ss += xr[i] * xr[i];
        const float r = 1.f / std::sqrt(ss / float(H) + eps);
        for (int i = 0; i < H; ++i) y[t * H + i] = w[i] * (xr[i] * r);
    }
}

void rope_tables(int n_pos, int head_dim, float theta, float* cos_out, float* sin_out) {
    const int half = head_dim / 2;
    for (int i = 0; i < half; ++i) {
        // inv_freq as Hugging Face computes it: 1 / theta^(2i / d) in float32.
        const float inv_freq = 1.f / std::pow(theta, float(2 * i) / float(head_dim));
        for (int p = 0; p < n_pos; ++p) {
            const float a = float(p) * inv_freq;
            cos_out[p * half + i] = std::cos(a);
            sin_out[p * half + i] = std::sin(a);
        }
    }
}

EF_VECTOR_CLONES
void rope_rows(int T, int n_heads, int head_dim, int pos0, const float* cos_tab, const float* sin_tab, float* x) {
    const int half = head_dim / 2;
    for (int t = 0; t < T; ++t) {
        const float* c = cos_tab + (pos0 + t) * half;
        const float* s = sin_tab + (pos0 + t) * half;
        for (int h = 0; h < n_heads; ++h) {
            float* v = x + (t * n_heads + h) * head_dim;
            for (int i = 0; i < half; ++i) {
                const float x1 = v[i], x2 = v[i + half];
                v[i] = x1 * c[i] - x2 * s[i];
                v[i + half] = x2 * c[i] + x1 * s[i];
            }
        }
    }
}

EF_VECTOR_CLONES
void dequantize_rope_rows(int T, int n_heads, int head_dim, int pos0, const int32_t* acc, int ldacc,
                          const float* scale, const float* cos_tab, const float* sin_tab, float* y) {
    // The expressions of dequantize_rows followed by rope_rows, in one pass and without the intermediate store.
    const int half = head_dim / 2, C = n_heads * head_dim;
    for (int t = 0; t < T; ++t) {
        const float* c = cos_tab + (pos0 + t) * half;
        const float* s = sin_tab + (pos0 + t) * half;
        for (int h = 0; h < n_heads; ++h) {
            const int32_t* a = acc + size_t(t) * ldacc + h * head_dim;
            const float* sc = scale + h * head_dim;
            float* out = y + size_t(t) * C + h * head_dim;
            for (int i = 0; i < half; ++i) {
                const float x1 = float(a[i]) * sc[i], x2 = float(a[i + half]) * sc[i + half];
                out[i] = x1 * c[i] - x2 * s[i];
                out[i + half] = x2 * c[i] + x1 * s[i];
            }
        }
    }
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"  // vexp_approx is always inlined: no 64-byte vector crosses a call
EF_VECTOR_CLONES
void silu_mul(int n, float* g, const float* u) {
    // 16 lanes at a time through vexp_approx: each clone splits the vector into its own registers (one zmm, two ymm,
    // four xmm; Neon q registers on aarch64). The tail takes the scalar exp_approx, the same polynomial.
    typedef float v16f __attribute__((vector_size(64)));
    typedef int32_t v16i __attribute__((vector_size(64)));
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        v16f x, y;
        std::memcpy(&x, g + i, sizeof x);
        std::memcpy(&y, u + i, sizeof y);
        x = x / (1.f + vexp_approx<v16f, v16i, false>(-x)) * y;
        std::memcpy(g + i, &x, sizeof x);
    }
    for (; i < n; ++i) g[i] = g[i] / (1.f + exp_approx(-g[i])) * u[i];
}
#pragma GCC diagnostic pop

void swiglu_quantize_rows(int T, int I, const int32_t* acc_g, const int32_t* acc_u, int ldacc, const float* scale_g,
                          const float* scale_u, const float* m, int8_t* xq, float* scratch) {
    swiglu_quantize_rows_bits(8, T, I, acc_g, acc_u, ldacc, scale_g, scale_u, m, xq, scratch);
}

void swiglu_quantize_rows_bits(int bits, int T, int I, const int32_t* acc_g, const int32_t* acc_u, int ldacc,
                               const float* scale_g, const float* scale_u, const float* m, void* xq, float* scratch) {
    float* g = scratch;
    float* u = scratch + I;
    const size_t row_bytes = size_t(I) * (bits / 8);
    for (int t = 0; t < T; ++t) {
        dequantize_rows(1, I, acc_g + size_t(t) * ldacc, ldacc, scale_g, g);
        dequantize_rows(1, I, acc_u + size_t(t) * ldacc, ldacc, scale_u, u);
        silu_mul(I, g, u);
        quantize_rows_bits(bits, 1, I, g, m, static_cast<char*>(xq) + t * row_bytes);
    }
}

void embed_rows(int T, int H, const int8_t* const* rows, const float* scales, float* x) {
    for (int t = 0; t < T; ++t)
        for (int i = 0; i < H; ++i) x[size_t(t) * H + i] = float(rows[t][i]) * scales[t];
}

#if defined(__x86_64__)
void lm_head_rows_avx512(int T, int H, int V, int v0, int v1, const float* h, const int8_t* codes,
                         const float* w_scale, float* logits);  // lm_head_avx512.cpp
void lm_head_rows_avx2(int T, int H, int V, int v0, int v1, const float* h, const int8_t* codes,
                       const float* w_scale, float* logits);  // lm_head_avx2.cpp
#endif

std::vector<LmHeadKernel> lm_head_kernels() {
    std::vector<LmHeadKernel> ks{{"portable", lm_head_rows_portable}};
#if defined(__x86_64__)
    if (cpu_features().avx2) ks.push_back({"avx2", lm_head_rows_avx2});
    if (cpu_features().avx512) ks.push_back({"avx512", lm_head_rows_avx512});
#endif
    return ks;
}

const LmHeadKernel& lm_head_kernel() {
    static const LmHeadKernel chosen = choose_kernel(lm_head_kernels(), "EDGEFLOW_LM_HEAD");
    return chosen;
}

void lm_head_rows(int T, int H, int V, int v0, int v1, const float* h, const int8_t* codes, const float* w_scale,
                  float* logits) {
    lm_head_kernel().fn(T, H, V, v0, v1, h, codes, w_scale, logits);
}

EF_VECTOR_CLONES
void lm_head_rows_portable(int T, int H, int V, int v0, int v1, const float* h, const int8_t* codes,
                           const float* w_scale, float* logits) {
    // Four vocabulary rows at a time share each load of h; the inner loop over k vectorizes.
    int v = v0;
    for (; v + 4 <= v1; v += 4) {
        const int8_t* r0 = codes + size_t(v) * H;
        const int8_t* r1 = r0 + H;
        const int8_t* r2 = r1 + H;
        const int8_t* r3 = r2 + H;
        for (int t = 0; t < T; ++t) {
            const float* ht = h + t * H;
            float s0 = 0.f, s1 = 0.f, s2 = 0.f, s3 = 0.f;
#pragma omp simd reduction(+ : s0, s1, s2, s3)
            for (int k = 0; k < H; ++k) {
                s0 += ht[k] * float(r0[k]);
                s1 += ht[k] * float(r1[k]);
                s2 += ht[k] * float(r2[k]);
                s3 += ht[k] * float(r3[k]);
            }
            float* lt = logits + size_t(t) * V;
            lt[v] = s0 * w_scale[v];
            lt[v + 1] = s1 * w_scale[v + 1];
            lt[v + 2] = s2 * w_scale[v + 2];
            lt[v + 3] = s3 * w_scale[v + 3];
        }
    }
    for (; v < v1; ++v) {
        const int8_t* r = codes + size_t(v) * H;
        for (int t = 0; t < T; ++t) {
            float s = 0.f;
#pragma omp simd reduction(+ : s)
            for (int k = 0; k < H; ++k) s += h[t * H + k] * float(r[k]);
            logits[size_t(t) * V + v] = s * w_scale[v];
        }
    }
}

}  // namespace edgeflow
