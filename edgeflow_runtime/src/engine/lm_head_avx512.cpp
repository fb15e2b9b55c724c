// The weight-only INT8 LM head (ops.h: lm_head_rows) with AVX-512 (compiled with -mavx512f -mavx512bw -mavx512vl;
// called only when the CPU has all three). Decode computes it once per token: 49152 x 576 int8 codes for the default
// model, more multiply-adds than any of its linears. The portable version's auto-vectorized loop widens the codes
// int8 -> int16 -> int32 in two steps at 8 lanes; here 16 codes go to 16 floats in one vpmovsxbd and one vcvtdq2ps,
// one FMA against h, four vocabulary rows sharing each vector of h. Per lane the sum runs over k = lane (mod 16), then
// one horizontal sum: the same products as the portable loop, associated differently (tests/test_ops.cpp bounds it).
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

namespace edgeflow {

namespace {

inline __m512 codes16(const int8_t* p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}

inline __m512 codes16(const int8_t* p, __mmask16 m) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, p)));
}

// logits[t, v0 + r] for R consecutive vocabulary rows starting at row v0.
template <int R>
void rows(int T, int H, int V, int v0, const float* h, const int8_t* codes, const float* w_scale, float* logits) {
    const int8_t* w = codes + size_t(v0) * H;
    for (int t = 0; t < T; ++t) {
        const float* ht = h + size_t(t) * H;
        __m512 acc[R];
        for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
        int k = 0;
        for (; k + 16 <= H; k += 16) {
            const __m512 x = _mm512_loadu_ps(ht + k);
            for (int r = 0; r < R; ++r) acc[r] = _mm512_fmadd_ps(x, codes16(w + size_t(r) * H + k), acc[r]);
        }
        if (k < H) {  // the tail: masked loads read nothing past the row
            const __mmask16 m = __mmask16((1u << (H - k)) - 1);
            const __m512 x = _mm512_maskz_loadu_ps(m, ht + k);
            for (int r = 0; r < R; ++r) acc[r] = _mm512_fmadd_ps(x, codes16(w + size_t(r) * H + k, m), acc[r]);
        }
        for (int r = 0; r < R; ++r) logits[size_t(t) * V + v0 + r] = _mm512_reduce_add_ps(acc[r]) * w_scale[v0 + r];
    }
}

}  // namespace

void lm_head_rows_avx512(int T, int H, int V, int v0, int v1, const float* h, const int8_t* codes,
                         const float* w_scale, float* logits) {
    int v = v0;
    for (; v + 4 <= v1; v += 4) rows<4>(T, H, V, v, h, codes, w_scale, logits);
    for (; v < v1; ++v) rows<1>(T, H, V, v, h, codes, w_scale, logits);
}

}  // namespace edgeflow
