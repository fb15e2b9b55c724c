// Neon A16 x INT8 GEMM (aarch64, ARMv8.0).
//
// The weights are widened to int16 as they are loaded (sxtl); smlal / smlal2 multiply 4 + 4 int16 pairs into int32
// lanes. A tile of 2 activation rows x 4 channels keeps 8 accumulators. A lane takes 2 products per 8 inputs, so
// kA16KBlock / 4 products of at most 2^22 per block (gemm16.h).
#include <arm_neon.h>

#include "gemm16.h"
#include "gemm16_blocked.h"

namespace edgeflow {
namespace {

struct NeonKernel {
    static constexpr int kStep = 8;

    template <int R, int N>
    static void tile(int k0, int k1, const int16_t* const* a, const int8_t* const* w, int64_t (*y)[4]) {
        int32x4_t acc[R][N];
        for (int r = 0; r < R; ++r)
            for (int n = 0; n < N; ++n) acc[r][n] = vdupq_n_s32(0);
        for (int k = k0; k < k1; k += kStep) {
            int16x8_t x[R];
            for (int r = 0; r < R; ++r) x[r] = vld1q_s16(a[r] + k);
            for (int n = 0; n < N; ++n) {
                const int16x8_t wn = vmovl_s8(vld1_s8(w[n] + k));
                for (int r = 0; r < R; ++r) {
                    acc[r][n] = vmlal_s16(acc[r][n], vget_low_s16(x[r]), vget_low_s16(wn));
                    acc[r][n] = vmlal_high_s16(acc[r][n], x[r], wn);
                }
            }
        }
        for (int r = 0; r < R; ++r)
            for (int n = 0; n < N; ++n) y[r][n] += vaddlvq_s32(acc[r][n]);  // summed in int64
    }
};

}  // namespace

void gemm_s16_neon(int T, int C, int K, const int16_t* a, int lda, const int8_t* b, int ldb, int64_t* y, int ldy) {
    gemm16::gemm<NeonKernel>(T, C, K, a, lda, b, ldb, y, ldy);
}

}  // namespace edgeflow
