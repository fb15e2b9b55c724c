// AVX2 INT8 GEMM (compiled with -mavx2; called only when the CPU has AVX2). pmaddubsw adds pairs of u x s products
// into saturating int16: with u <= 128 and |s| <= 127 a pair is at most 32512, so it never saturates; pmaddwd by
// ones widens the pairs to int32. Four instructions per 32 multiply-adds (with the sign).
#include "gemm.h"
#include "gemm_x86_tile.h"

namespace edgeflow {
namespace {

struct MaddubsStep {
    static __m256i dot(__m256i acc, __m256i u, __m256i s) {
        const __m256i pairs = _mm256_maddubs_epi16(u, s);
        return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
    }
};

}  // namespace

void gemm_s8_avx2(int T, int C, int K, const int8_t* a, int lda, const int8_t* b, int ldb, int32_t* y, int ldy) {
    gemm_blocked<X86Kernel<MaddubsStep>>(T, C, K, a, lda, b, ldb, y, ldy);
}

}  // namespace edgeflow
