// Decode attention with AVX-512 (compiled with -mavx512f -mfma; chosen by decode_attention_kernel() only when the CPU
// has AVX-512 F): one query row per head, the G query heads of one KV head in one item, so every cached key and
// value row is loaded once for the whole group (SmolLM2-135M: G = 3, head_dim 64).
//
// Two passes over the keys, as attention_ref does, with head_dim in vector registers instead of memory:
//   scores   s[h, j] = scale * (q_h . k_j): the G query vectors stay in registers, each key row is D16 = d / 16
//            loads, each score D16 FMAs and one horizontal sum;
//   softmax  per head, max and exp_approx(s - max) with its sum (the reference's polynomial, vectorized by GCC);
//   P.V      o_h += p[h, j] * v_j: the G x D16 output accumulators stay in registers, each value row is D16 loads.
// An item may cover part of the keys (attention_plan's split for few KV heads on more threads): it then leaves its
// unnormalized sums, maximum and sum for attention_merge_parts instead of the output. Other head sizes (head_dim not
// 64 or 128), items of more rows, or groups of more than 8 heads go to the tiled AVX-512 kernel, never split. Numerics: the same products as attention_ref in another association (vector lanes); tests/test_ops.cpp
// bounds the difference like the tiled kernels'.
#include <immintrin.h>

#include <cmath>
#include <vector>

#include "attention.h"
#include "exp_approx.h"

namespace edgeflow {

void attention_item_avx512(const AttentionArgs& a, const AttentionItem& it);  // attention_avx512.cpp

namespace {

constexpr int kMaxGroup = 8;

// Keys at positions [j0, j1): every key its row sees (0 .. pos0 + t0), or a split item's part of them.
template <int D16>
void decode_item(const AttentionArgs& a, const AttentionItem& it) {
    const int d = D16 * 16, G = it.h1 - it.h0;
    const int j0 = item_keys(a, it).begin, n = item_keys(a, it).end - j0;  // (T = 1: t1 = t0 + 1)
    const float scale = 1.f / std::sqrt(float(d));
    thread_local std::vector<float> scores;  // [G][n]: score of key j0 + j
    if (scores.size() < size_t(G) * n) scores.resize(size_t(G) * n);
    const float* kb = a.k + size_t(j0) * a.kv_stride + size_t(it.kv_head) * d;
    const float* vb = a.v + size_t(j0) * a.kv_stride + size_t(it.kv_head) * d;

    __m512 q[kMaxGroup][D16];
    for (int h = 0; h < G; ++h)
        for (int c = 0; c < D16; ++c)
            q[h][c] = _mm512_loadu_ps(a.q + size_t(it.t0) * a.q_stride + size_t(it.h0 + h) * d + 16 * c);
    for (int j = 0; j < n; ++j) {
        const float* kj = kb + size_t(j) * a.kv_stride;
        __m512 k[D16];
        for (int c = 0; c < D16; ++c) k[c] = _mm512_loadu_ps(kj + 16 * c);
        for (int h = 0; h < G; ++h) {
            __m512 acc = _mm512_mul_ps(q[h][0], k[0]);
            for (int c = 1; c < D16; ++c) acc = _mm512_fmadd_ps(q[h][c], k[c], acc);
            scores[size_t(h) * n + j] = _mm512_reduce_add_ps(acc) * scale;
        }
    }
    float maxes[kMaxGroup], sums[kMaxGroup];
    for (int h = 0; h < G; ++h) {
        float* s = scores.data() + size_t(h) * n;
        float mx = -INFINITY;
        for (int j = 0; j < n; ++j) mx = s[j] > mx ? s[j] : mx;
        float sum = 0.f;
#pragma omp simd reduction(+ : sum)
        for (int j = 0; j < n; ++j) {
            s[j] = exp_approx(s[j] - mx);
            sum += s[j];
        }
        maxes[h] = mx, sums[h] = sum;
    }
    __m512 o[kMaxGroup][D16];
    for (int h = 0; h < G; ++h)
        for (int c = 0; c < D16; ++c) o[h][c] = _mm512_setzero_ps();
    for (int j = 0; j < n; ++j) {
        const float* vj = vb + size_t(j) * a.kv_stride;
        __m512 v[D16];
        for (int c = 0; c < D16; ++c) v[c] = _mm512_loadu_ps(vj + 16 * c);
        for (int h = 0; h < G; ++h) {
            const __m512 p = _mm512_set1_ps(scores[size_t(h) * n + j]);
            for (int c = 0; c < D16; ++c) o[h][c] = _mm512_fmadd_ps(p, v[c], o[h][c]);
        }
    }
    if (it.part >= 0) {  // a part: its unnormalized sums, maximum and sum, for attention_merge_parts
        for (int h = 0; h < G; ++h) {
            float* p = attention_part(a, it, h);
            for (int c = 0; c < D16; ++c) _mm512_storeu_ps(p + 16 * c, o[h][c]);
            p[d] = maxes[h], p[d + 1] = sums[h];
        }
        return;
    }
    for (int h = 0; h < G; ++h) {
        const __m512 r = _mm512_set1_ps(1.f / sums[h]);
        float* out = a.out + size_t(it.t0) * a.out_stride + size_t(it.h0 + h) * d;
        for (int c = 0; c < D16; ++c) _mm512_storeu_ps(out + 16 * c, _mm512_mul_ps(o[h][c], r));
    }
    attention_quantize_item(a, it);
}

}  // namespace

bool attention_decode_avx512_splits(const AttentionArgs& a) {
    return a.T == 1 && a.n_heads / a.n_kv_heads <= kMaxGroup && a.out_stride == a.q_stride && (a.d == 64 || a.d == 128);
}

void attention_decode_avx512(const AttentionArgs& a, const AttentionItem& it) {
    const bool fits = it.t1 - it.t0 == 1 && it.h1 - it.h0 <= kMaxGroup && a.out_stride == a.q_stride;
    if (fits && a.d == 64) return decode_item<4>(a, it);
    if (fits && a.d == 128) return decode_item<8>(a, it);
    attention_item_avx512(a, it);  // (never a part: attention_decode_avx512_splits refuses these shapes)
}

}  // namespace edgeflow
