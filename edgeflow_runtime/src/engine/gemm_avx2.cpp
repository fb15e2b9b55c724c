// AVX2 INT8 GEMM (compiled with -mavx2; called only when the CPU has AVX2).
//
// pmaddubsw multiplies unsigned by signed bytes and adds adjacent pairs into saturating int16. With signed data on
// both sides it gets u = |w| (<= 128 fits a byte) and s = sign(x, w) = x * sgn(w): with x in [-127, 127] a pair is
// at most 2 * 128 * 127 = 32512 and never saturates (|x| and sign(w, x) would turn w = -128 into +128 * -1).
// pmaddwd by ones widens the pairs to int32. Four instructions per 32 multiply-adds.
#include "gemm.h"
#include "gemm_blocked.h"
#include "gemm_x86.h"

namespace edgeflow {
namespace {

// acc += the 32 products u x s (u unsigned, s signed), summed in fours into the int32 lanes.
inline __m256i dot(__m256i acc, __m256i u, __m256i s) {
    const __m256i pairs = _mm256_maddubs_epi16(u, s);
    return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
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
        int k = 0;
        for (; k + 32 <= K; k += 32) {
            __m256i w[N], aw[N];
            for (int n = 0; n < N; ++n) {
                w[n] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + n * ldb + k));
                aw[n] = _mm256_abs_epi8(w[n]);
            }
            for (int r = 0; r < R; ++r) {
                const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + r * lda + k));
                for (int n = 0; n < N; ++n) acc[r][n] = dot(acc[r][n], aw[n], _mm256_sign_epi8(x, w[n]));
            }
        }
        for (int r = 0; r < R; ++r)
            for (int n = 0; n < N; ++n)
                y[r * ldy + n] = hsum_epi32(acc[r][n]) + dot_tail(a + r * lda, b + n * ldb, k, K);
    }
};


}  // namespace

void gemm_s8_avx2(int T, int C, int K, const int8_t* a, int lda, const int8_t* b, int ldb, int32_t* y, int ldy) {
    gemm_blocked<Avx2Kernel>(T, C, K, a, lda, b, ldb, y, ldy);
}

}  // namespace edgeflow
