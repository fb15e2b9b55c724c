// The weight-only INT8 LM head (ops.h: lm_head_rows) with AVX-512 (compiled with -mavx512f -mavx512bw -mavx512vl;
// called only when the CPU has all three). Decode computes it once per token: 49152 x 576 int8 codes for the default
// model, more multiply-adds than any of its linears; scoring computes it for many rows (a 2048-token perplexity
// window, the endings of a multiple-choice item).
//   Up to three rows of h (decode): 16 codes go to 16 floats in one vpmovsxbd and one vcvtdq2ps, one FMA against h,
//   four vocabulary rows sharing each vector of h.
//   More rows: converting the codes again for every row of h costs two conversions per FMA, so a block of four
//   vocabulary rows is widened once into a float buffer (4 x Hp floats, L1-resident) and four rows of h at a time run
//   against it: 16 accumulators, 8 loads per 16 FMAs. One thread, half the default model's vocabulary: 0.51 ->
//   0.33-0.39 ms per row at 25-512 rows (1.5x), the same bits.
// Per lane the sum runs over k = lane (mod 16), then one horizontal sum: the same association in both paths and for
// every row whatever T is (a row's logits do not depend on the rows it was computed with; prefix-shared scoring
// relies on it). The same products as the portable loop, associated differently (tests/test_ops.cpp bounds it).
// gcc 12's AVX-512 headers build some intrinsics from _mm512_undefined_*() and warn about it once inlined (GCC bug
// 105593, fixed in 13): not this file's variables.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <vector>

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

// buf [R][Hp] <- float(codes[v0 + r][k]), zero past H (Hp = H rounded up to 16).
template <int R>
void widen(int H, int Hp, const int8_t* w, float* buf) {
    for (int r = 0; r < R; ++r) {
        const int8_t* src = w + size_t(r) * H;
        float* dst = buf + size_t(r) * Hp;
        int k = 0;
        for (; k + 16 <= H; k += 16) _mm512_storeu_ps(dst + k, codes16(src + k));
        if (k < H) _mm512_storeu_ps(dst + k, codes16(src + k, __mmask16((1u << (H - k)) - 1)));
    }
}

// logits[t0 + i, v0 + r] for four rows of h (i < 4) against R vocabulary rows widened in buf. Past H the masked
// loads of h read zeros and the buffer holds zeros: the lanes add +0, as the one-row path's masked lanes do. (The
// main loop and the tail are written out separately: with the mask chosen inside the loop, gcc 12 stores all 16
// accumulators to the stack every iteration, and the kernel runs at 0.7x the one-row path.)
template <int R>
void widened_rows4(int H, int Hp, int V, int v0, int t0, const float* h, const float* buf, const float* w_scale,
                   float* logits) {
    const float* ht = h + size_t(t0) * H;
    __m512 acc[4 * R];  // [row of h][vocabulary row]
    for (int j = 0; j < 4 * R; ++j) acc[j] = _mm512_setzero_ps();
    int k = 0;
    for (; k + 16 <= H; k += 16) {
        __m512 x[4];
        for (int i = 0; i < 4; ++i) x[i] = _mm512_loadu_ps(ht + size_t(i) * H + k);
        for (int r = 0; r < R; ++r) {
            const __m512 w = _mm512_loadu_ps(buf + size_t(r) * Hp + k);
            for (int i = 0; i < 4; ++i) acc[i * R + r] = _mm512_fmadd_ps(x[i], w, acc[i * R + r]);
        }
    }
    if (k < H) {
        const __mmask16 m = __mmask16((1u << (H - k)) - 1);
        __m512 x[4];
        for (int i = 0; i < 4; ++i) x[i] = _mm512_maskz_loadu_ps(m, ht + size_t(i) * H + k);
        for (int r = 0; r < R; ++r) {
            const __m512 w = _mm512_loadu_ps(buf + size_t(r) * Hp + k);
            for (int i = 0; i < 4; ++i) acc[i * R + r] = _mm512_fmadd_ps(x[i], w, acc[i * R + r]);
        }
    }
    for (int i = 0; i < 4; ++i)
        for (int r = 0; r < R; ++r)
            logits[size_t(t0 + i) * V + v0 + r] = _mm512_reduce_add_ps(acc[i * R + r]) * w_scale[v0 + r];
}

// R vocabulary rows for all T rows of h: blocks of four rows of h against the widened codes, the last T % 4 rows
// one at a time as decode computes them.
template <int R>
void widened_block(int T, int H, int Hp, int V, int v0, const float* h, const int8_t* codes, const float* w_scale,
                   float* buf, float* logits) {
    widen<R>(H, Hp, codes + size_t(v0) * H, buf);
    const int T4 = T / 4 * 4;
    for (int t = 0; t < T4; t += 4) widened_rows4<R>(H, Hp, V, v0, t, h, buf, w_scale, logits);
    if (T4 < T) rows<R>(T - T4, H, V, v0, h + size_t(T4) * H, codes, w_scale, logits + size_t(T4) * V);
}

}  // namespace

void lm_head_rows_avx512(int T, int H, int V, int v0, int v1, const float* h, const int8_t* codes,
                         const float* w_scale, float* logits) {
    int v = v0;
    if (T < 4) {
        for (; v + 4 <= v1; v += 4) rows<4>(T, H, V, v, h, codes, w_scale, logits);
        for (; v < v1; ++v) rows<1>(T, H, V, v, h, codes, w_scale, logits);
        return;
    }
    const int Hp = (H + 15) / 16 * 16;
    thread_local std::vector<float> buf;
    buf.resize(size_t(4) * Hp);
    for (; v + 4 <= v1; v += 4) widened_block<4>(T, H, Hp, V, v, h, codes, w_scale, buf.data(), logits);
    for (; v < v1; ++v) widened_block<1>(T, H, Hp, V, v, h, codes, w_scale, buf.data(), logits);
}

}  // namespace edgeflow
