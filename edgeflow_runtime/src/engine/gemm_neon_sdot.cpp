// Neon INT8 GEMM with the ARMv8.2 dot-product instruction (compiled with +dotprod; called only when the CPU
// reports it). sdot adds four signed byte products into each int32 lane: signed x signed, no saturation, so any
// int8 on either side is exact.
#include <arm_neon.h>

#include "gemm.h"
#include "gemm_blocked.h"

namespace edgeflow {
namespace {

// 4 x 4 tile: 16 accumulators, 4 weight vectors and one activation vector of the 32 Neon registers.
struct SdotKernel {
    static constexpr int kN = 4;

    template <int R, int N>
    static void tile(int K, const int8_t* a, int lda, const int8_t* b, int ldb, int32_t* y, int ldy) {
        int32x4_t acc[R][N];
        for (int r = 0; r < R; ++r)
            for (int n = 0; n < N; ++n) acc[r][n] = vdupq_n_s32(0);
        int k = 0;
        for (; k + 16 <= K; k += 16) {
            int8x16_t w[N];
            for (int n = 0; n < N; ++n) w[n] = vld1q_s8(b + n * ldb + k);
            for (int r = 0; r < R; ++r) {
                const int8x16_t x = vld1q_s8(a + r * lda + k);
                for (int n = 0; n < N; ++n) acc[r][n] = vdotq_s32(acc[r][n], x, w[n]);
            }
        }
        for (int r = 0; r < R; ++r)
            for (int n = 0; n < N; ++n) {
                const int32_t s = vaddvq_s32(acc[r][n]) + dot_tail(a + r * lda, b + n * ldb, k, K);
                y[r * ldy + n] = s;
            }
    }
};

}  // namespace

void gemm_s8_neon_sdot(int T, int C, int K, const int8_t* a, int lda, const int8_t* b, int ldb, int32_t* y,
                       int ldy) {
    gemm_blocked<SdotKernel>(T, C, K, a, lda, b, ldb, y, ldy);
}

}  // namespace edgeflow
