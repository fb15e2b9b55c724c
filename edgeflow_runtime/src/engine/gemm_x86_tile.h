// The x86 INT8 GEMM tile, shared by the AVX2 and AVX-VNNI kernels; Step::dot(acc, u, s) adds the products of 32
// unsigned bytes u and signed bytes s into the eight int32 lanes of acc, exactly. Include only from a kernel's source
// file (compiled for that kernel's instruction set) with Step in an anonymous namespace.
//
// Signed x signed through an unsigned x signed instruction: u = |w| (<= 128 fits a byte) and s = sign(x, w) = x *
// sgn(w), with x in [-127, 127] so s never overflows. (|x| and sign(w, x) would turn w = -128 into +128 * -1.)
#pragma once
#include <immintrin.h>

#include "gemm_blocked.h"

namespace edgeflow {

static inline int32_t hsum_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

template <class Step>
struct X86Kernel {
    static constexpr int kN = 2;

    // One R x N tile of y: R activation rows against N weight rows. 4 x 2 keeps 8 accumulators, 2 weights,
    // 2 |weights| and one activation vector in the 16 ymm registers.
    template <int R, int N>
    static void tile(int K, const int8_t* a, int lda, const int8_t* b, int ldb, int32_t* y, int ldy) {
        __m256i acc[R][N];
        for (int r = 0; r < R; ++r)
            for (int n = 0; n < N; ++n) acc[r][n] = _mm256_setzero_si256();
        int k = 0;
        for (; k + 32 <= K; k += 32) {
            __m256i w[N], aw[N];
            for (int n = 0; n < N; ++n) {
                w[n] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + n * ldb + k));
                aw[n] = _mm256_abs_epi8(w[n]);
            }
            for (int r = 0; r < R; ++r) {
                const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + r * lda + k));
                for (int n = 0; n < N; ++n) acc[r][n] = Step::dot(acc[r][n], aw[n], _mm256_sign_epi8(x, w[n]));
            }
        }
        for (int r = 0; r < R; ++r)
            for (int n = 0; n < N; ++n)
                y[r * ldy + n] = hsum_epi32(acc[r][n]) + dot_tail(a + r * lda, b + n * ldb, k, K);
    }
};

}  // namespace edgeflow
