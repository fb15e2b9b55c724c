// AVX2 A16 x INT8 GEMM (compiled with -mavx2; called only when the CPU has AVX2).
//
// pmaddwd multiplies 16 int16 pairs and adds adjacent products into 8 int32 lanes; the weights are widened to int16
// as they are loaded (pmovsxbw). A tile of 2 activation rows x 4 channels keeps 8 accumulators, 2 activation vectors
// and one weight vector in registers: per 16 inputs, 2 + 4 loads, 8 pmaddwd and 8 paddd for 128 multiply-adds.
// A lane takes 2 products per step, so kA16KBlock / 8 products of at most 2^22 per block (gemm16.h).
#include <immintrin.h>

#include "gemm16.h"
#include "gemm16_blocked.h"

namespace edgeflow {
namespace {

int64_t hsum64(__m256i v) {
    alignas(32) int32_t lanes[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), v);
    int64_t s = 0;
    for (const int32_t x : lanes) s += x;
    return s;
}

struct Avx2Kernel {
    static constexpr int kStep = 16;

    template <int R, int N>
    static void tile(int k0, int k1, const int16_t* const* a, const int8_t* const* w, int64_t (*y)[4]) {
        __m256i acc[R][N];
        for (int r = 0; r < R; ++r)
            for (int n = 0; n < N; ++n) acc[r][n] = _mm256_setzero_si256();
        for (int k = k0; k < k1; k += kStep) {
            __m256i x[R];
            for (int r = 0; r < R; ++r) x[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[r] + k));
            for (int n = 0; n < N; ++n) {
                const __m256i wn = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w[n] + k)));
                for (int r = 0; r < R; ++r) acc[r][n] = _mm256_add_epi32(acc[r][n], _mm256_madd_epi16(x[r], wn));
            }
        }
        for (int r = 0; r < R; ++r)
            for (int n = 0; n < N; ++n) y[r][n] += hsum64(acc[r][n]);
    }
};

}  // namespace

void gemm_s16_avx2(int T, int C, int K, const int16_t* a, int lda, const int8_t* b, int ldb, int64_t* y, int ldy) {
    gemm16::gemm<Avx2Kernel>(T, C, K, a, lda, b, ldb, y, ldy);
}

}  // namespace edgeflow
