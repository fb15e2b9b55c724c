// Neon INT8 GEMM with the ARMv8.2 dot-product instruction (compiled with +dotprod; called only when the CPU
// reports it). sdot adds four signed byte products into each int32 lane: signed x signed, no saturation, so any
// int8 on either side is exact.
#include <arm_neon.h>

#include "gemm.h"

namespace edgeflow {
namespace {

// 4 x 4 tile: 16 accumulators, 4 weight vectors and one activation vector of the 32 Neon registers.
template <int R, int N>
inline void tile(int K, const int8_t* a, int lda, const int8_t* b, int ldb, int32_t* y, int ldy) {
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
            int32_t s = vaddvq_s32(acc[r][n]);
            for (int kk = k; kk < K; ++kk) s += int32_t(a[r * lda + kk]) * int32_t(b[n * ldb + kk]);
            y[r * ldy + n] = s;
        }
}

template <int R>
inline void row_block(int C, int K, const int8_t* a, int lda, const int8_t* b, int ldb, int32_t* y, int ldy) {
    int c = 0;
    for (; c + 4 <= C; c += 4) tile<R, 4>(K, a, lda, b + c * ldb, ldb, y + c, ldy);
    for (; c < C; ++c) tile<R, 1>(K, a, lda, b + c * ldb, ldb, y + c, ldy);
}

}  // namespace

void gemm_s8_neon_sdot(int T, int C, int K, const int8_t* a, int lda, const int8_t* b, int ldb, int32_t* y,
                       int ldy) {
    constexpr int kCBlock = 16;
    for (int c0 = 0; c0 < C; c0 += kCBlock) {
        const int nc = C - c0 < kCBlock ? C - c0 : kCBlock;
        int t = 0;
        for (; t + 4 <= T; t += 4) row_block<4>(nc, K, a + t * lda, lda, b + c0 * ldb, ldb, y + t * ldy + c0, ldy);
        for (; t < T; ++t) row_block<1>(nc, K, a + t * lda, lda, b + c0 * ldb, ldb, y + t * ldy + c0, ldy);
    }
}

}  // namespace edgeflow
