// AVX-VNNI INT8 GEMM (compiled with -mavx2 -mavxvnni; called only when the CPU has AVX-VNNI). vpdpbusd adds each
// group of four u x s products straight into an int32 lane, no 16-bit intermediate, nothing saturates: two
// instructions per 32 multiply-adds (with the sign) instead of the AVX2 kernel's four.
#include "gemm.h"
#include "gemm_x86_tile.h"

namespace edgeflow {
namespace {

struct VnniStep {
    static __m256i dot(__m256i acc, __m256i u, __m256i s) { return _mm256_dpbusd_avx_epi32(acc, u, s); }
};

}  // namespace

void gemm_s8_avxvnni(int T, int C, int K, const int8_t* a, int lda, const int8_t* b, int ldb, int32_t* y, int ldy) {
    gemm_blocked<X86Kernel<VnniStep>>(T, C, K, a, lda, b, ldb, y, ldy);
}

}  // namespace edgeflow
