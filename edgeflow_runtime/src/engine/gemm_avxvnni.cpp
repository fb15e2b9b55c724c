// AVX-VNNI INT8 GEMM (compiled with -mavx2 -mavxvnni; called only when the CPU has AVX-VNNI).
//
// vpdpbusd multiplies unsigned by signed bytes and adds each group of four products into an int32 lane with no
// 16-bit intermediate, so nothing saturates. The activations become unsigned by an offset instead of a per-product
// sign: x + 128 (one xor with 0x80 per loaded activation vector, shared by every weight row of the tile), and
//   sum_k x[k] w[k] = sum_k (x[k] + 128) w[k] - 128 * sum_k w[k]
// where the weight-row sums are computed once per 16-channel block. One vpdpbusd per 32 multiply-adds.
#include "gemm.h"
#include "gemm_blocked.h"
#include "gemm_x86.h"

namespace edgeflow {
namespace {

// 4 x 3 tile: 12 accumulators, 3 weight vectors and one activation vector in the 16 ymm registers. Writes the
// offset sums sum_k (x + 128) w; the caller subtracts 128 * sum_k w per channel.
template <int R, int N>
void offset_tile(int K, const int8_t* a, int lda, const int8_t* b, int ldb, int32_t* y, int ldy) {
    __m256i acc[R][N];
    for (int r = 0; r < R; ++r)
        for (int n = 0; n < N; ++n) acc[r][n] = _mm256_setzero_si256();
    const __m256i offset = _mm256_set1_epi8(char(0x80));
    int k = 0;
    for (; k + 32 <= K; k += 32) {
        __m256i w[N];
        for (int n = 0; n < N; ++n) w[n] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + n * ldb + k));
        for (int r = 0; r < R; ++r) {
            const __m256i xu = _mm256_xor_si256(
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + r * lda + k)), offset);
            for (int n = 0; n < N; ++n) acc[r][n] = _mm256_dpbusd_avx_epi32(acc[r][n], xu, w[n]);
        }
    }
    for (int r = 0; r < R; ++r)
        for (int n = 0; n < N; ++n) {
            int32_t tail = 0;  // the offset form of dot_tail
            for (int kk = k; kk < K; ++kk) tail += (int32_t(a[r * lda + kk]) + 128) * int32_t(b[n * ldb + kk]);
            y[r * ldy + n] = hsum_epi32(acc[r][n]) + tail;
        }
}

template <int R>
void offset_rows(int C, int K, const int8_t* a, int lda, const int8_t* b, int ldb, int32_t* y, int ldy) {
    int c = 0;
    for (; c + 3 <= C; c += 3) offset_tile<R, 3>(K, a, lda, b + c * ldb, ldb, y + c, ldy);
    for (; c < C; ++c) offset_tile<R, 1>(K, a, lda, b + c * ldb, ldb, y + c, ldy);
}

}  // namespace

void gemm_s8_avxvnni(int T, int C, int K, const int8_t* a, int lda, const int8_t* b, int ldb, int32_t* y, int ldy) {
    constexpr int kCBlock = 24;  // weight rows kept in L1 while the activation rows stream past (a multiple of 3)
    int32_t wsum[kCBlock];
    for (int c0 = 0; c0 < C; c0 += kCBlock) {
        const int nc = C - c0 < kCBlock ? C - c0 : kCBlock;
        const int8_t* bb = b + c0 * ldb;
        for (int n = 0; n < nc; ++n) {
            int32_t s = 0;
            for (int k = 0; k < K; ++k) s += bb[n * ldb + k];
            wsum[n] = s;
        }
        int t = 0;
        for (; t + 4 <= T; t += 4) offset_rows<4>(nc, K, a + t * lda, lda, bb, ldb, y + t * ldy + c0, ldy);
        for (; t < T; ++t) offset_rows<1>(nc, K, a + t * lda, lda, bb, ldb, y + t * ldy + c0, ldy);
        for (int r = 0; r < T; ++r)
            for (int n = 0; n < nc; ++n) y[r * ldy + c0 + n] -= 128 * wsum[n];
    }
}

}  // namespace edgeflow
