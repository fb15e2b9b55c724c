// Neon INT8 GEMM for aarch64 CPUs without the dot-product extension (ARMv8.0).
//
// smull multiplies 8 byte pairs into int16, smlal adds a second 8; with a in [-127, 127] each int16 lane holds at
// most 2 * 127 * 128 = 32512, so nothing overflows before sadalp widens the pairs into int32.
#include <arm_neon.h>

#include "gemm.h"
#include "gemm_blocked.h"

namespace edgeflow {
namespace {

struct NeonKernel {
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
                for (int n = 0; n < N; ++n) {
                    int16x8_t p = vmull_s8(vget_low_s8(x), vget_low_s8(w[n]));
                    p = vmlal_s8(p, vget_high_s8(x), vget_high_s8(w[n]));
                    acc[r][n] = vpadalq_s16(acc[r][n], p);
                }
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

void gemm_s8_neon(int T, int C, int K, const int8_t* a, int lda, const int8_t* b, int ldb, int32_t* y, int ldy) {
    gemm_blocked<NeonKernel>(T, C, K, a, lda, b, ldb, y, ldy);
}

}  // namespace edgeflow
