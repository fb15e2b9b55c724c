// The weight-only INT8 LM head (ops.h: lm_head_rows) with AVX2 + FMA (compiled with -mavx2 -mfma; called only when
// the CPU has both and no AVX-512). Scoring asks for the logits of many rows (a 2048-token perplexity window: 2048 x
// 49152 x 576 multiply-adds for the default model), where the portable loop converts every int8 code to float once
// per row of h. Here a block of R vocabulary rows is converted once into a float buffer (R x H floats, L1-resident)
// and every row of h runs against it: 8 lanes, one FMA per 8 codes, R rows sharing each load of h. Per lane the sum
// runs over k = lane (mod 8), then one horizontal sum, the same association for every row whatever T is (so a row's
// logits do not depend on which rows it was computed with); tests/test_ops.cpp bounds it against a double sum.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace edgeflow {

namespace {

constexpr int kRows = 4;  // vocabulary rows per block: 4 accumulators + h + a code vector stay in registers

inline float hsum(__m256 v) {
    const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 d = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(d, _mm_movehdup_ps(d)));
}

// buf [R][Hp] <- float(codes[v0 + r][k]), zero past H (Hp = H rounded up to 8).
template <int R>
void widen(int H, int Hp, const int8_t* w, float* buf) {
    for (int r = 0; r < R; ++r) {
        const int8_t* src = w + size_t(r) * H;
        float* dst = buf + size_t(r) * Hp;
        int k = 0;
        for (; k + 8 <= H; k += 8) {
            const __m128i c = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src + k));
            _mm256_storeu_ps(dst + k, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(c)));
        }
        for (; k < Hp; ++k) dst[k] = k < H ? float(src[k]) : 0.f;
    }
}

// logits[t, v0 + r] for R consecutive vocabulary rows, their codes widened in buf. (Two rows of h per pass, sharing
// each load of the buffer, measured no faster: at 4 x 8 lanes the loop is already at the FMA units' rate.)
template <int R>
void rows(int T, int H, int Hp, int V, int v0, const float* h, const float* buf, const float* w_scale,
          float* logits) {
    const int tail = H % 8;
    const __m256i tail_mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(tail), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    for (int t = 0; t < T; ++t) {
        const float* ht = h + size_t(t) * H;
        __m256 acc[R];
        for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
        int k = 0;
        for (; k + 8 <= H; k += 8) {
            const __m256 x = _mm256_loadu_ps(ht + k);
            for (int r = 0; r < R; ++r) acc[r] = _mm256_fmadd_ps(x, _mm256_loadu_ps(buf + size_t(r) * Hp + k), acc[r]);
        }
        if (tail) {  // a masked load reads nothing past the row of h; the buffer is zero there
            const __m256 x = _mm256_maskload_ps(ht + k, tail_mask);
            for (int r = 0; r < R; ++r) acc[r] = _mm256_fmadd_ps(x, _mm256_loadu_ps(buf + size_t(r) * Hp + k), acc[r]);
        }
        for (int r = 0; r < R; ++r) logits[size_t(t) * V + v0 + r] = hsum(acc[r]) * w_scale[v0 + r];
    }
}

}  // namespace

void lm_head_rows_avx2(int T, int H, int V, int v0, int v1, const float* h, const int8_t* codes,
                       const float* w_scale, float* logits) {
    const int Hp = (H + 7) / 8 * 8;
    thread_local std::vector<float> buf;
    buf.resize(size_t(kRows) * Hp);
    int v = v0;
    for (; v + kRows <= v1; v += kRows) {
        widen<kRows>(H, Hp, codes + size_t(v) * H, buf.data());
        rows<kRows>(T, H, Hp, V, v, h, buf.data(), w_scale, logits);
    }
    for (; v < v1; ++v) {
        widen<1>(H, Hp, codes + size_t(v) * H, buf.data());
        rows<1>(T, H, Hp, V, v, h, buf.data(), w_scale, logits);
    }
}

}  // namespace edgeflow
