// AVX2 INT8 GEMM (compiled with -mavx2; called only when the CPU has AVX2).
//
// pmaddubsw multiplies unsigned by signed bytes and adds adjacent pairs into saturating int16. With signed data on
// both sides we feed it |w| as the unsigned operand and sign(x, w) = x * sgn(w) as the signed one: |w| <= 128 and
// |x| <= 127, so each pair sum is at most 2 * 128 * 127 = 32512 and never saturates (the other way round, |x| and
// sign(w, x), would turn w = -128 into +128 * -1 wrongly). pmaddwd by ones widens the pairs to int32.
#include <immintrin.h>

#include "gemm.h"
#include "gemm_blocked.h"

namespace edgeflow {
namespace {

inline int32_t hsum_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

// One R x N tile of y: R activation rows against N weight rows. 4 x 2 keeps 8 accumulators, 2 weights, 2 |weights|
// and one activation vector in the 16 ymm registers.
struct Avx2Kernel {
    static constexpr int kN = 2;

    template <int R, int N>
    static void tile(int K, const int8_t* a, int lda, const int8_t* b, int ldb, int32_t* y, int ldy) {
        __m256i acc[R][N];
        for (int r = 0; r < R; ++r)
            for (int n = 0; n < N; ++n) acc[r][n] = _mm256_setzero_si256();
        const __m256i ones = _mm256_set1_epi16(1);
        int k = 0;
        for (; k + 32 <= K; k += 32) {
            __m256i w[N], aw[N];
            for (int n = 0; n < N; ++n) {
                w[n] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + n * ldb + k));
                aw[n] = _mm256_abs_epi8(w[n]);
            }
            for (int r = 0; r < R; ++r) {
                const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + r * lda + k));
                for (int n = 0; n < N; ++n) {
                    const __m256i p = _mm256_maddubs_epi16(aw[n], _mm256_sign_epi8(x, w[n]));
                    acc[r][n] = _mm256_add_epi32(acc[r][n], _mm256_madd_epi16(p, ones));
                }
            }
        }
        for (int r = 0; r < R; ++r)
            for (int n = 0; n < N; ++n) {
                const int32_t s = hsum_epi32(acc[r][n]) + dot_tail(a + r * lda, b + n * ldb, k, K);
                y[r * ldy + n] = s;
            }
    }
};

}  // namespace

void gemm_s8_avx2(int T, int C, int K, const int8_t* a, int lda, const int8_t* b, int ldb, int32_t* y, int ldy) {
    gemm_blocked<Avx2Kernel>(T, C, K, a, lda, b, ldb, y, ldy);
}

}  // namespace edgeflow
