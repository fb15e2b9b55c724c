// AVX-512 VNNI A16 x INT8 GEMM (compiled with -mavx512f -mavx512bw -mavx512vnni; called only when the CPU has all
// three).
//
// vpdpwssd multiplies 32 int16 pairs and adds each adjacent pair of products into one of 16 int32 lanes of the
// accumulator in one instruction (AVX2's pmaddwd + paddd, at twice the width). The weights are widened to int16 as
// they are loaded (vpmovsxbw, 32 int8 -> 32 int16). The tile is the AVX2 kernel's, 2 activation rows x 4 channels:
// per 32 inputs, 2 + 4 loads and 8 vpdpwssd for 256 multiply-adds. A lane takes 2 products per step, so a block of
// kA16KBlock inputs puts kA16KBlock / 16 products of at most 2^22 in a lane (< 2^28, gemm16.h); vpdpwssd does not
// saturate (vpdpwssds would), and no sum can reach the int32 limit anyway.
// GCC 12's AVX-512 headers pass an uninitialized "undefined" vector as the unused merge source of unmasked
// intrinsics, which -Wall reports at every inlined use (a false positive; gemm_avx512vnni.cpp says the same).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include "gemm16.h"
#include "gemm16_blocked.h"

namespace edgeflow {
namespace {

struct Avx512VnniKernel {
    static constexpr int kStep = 32;

    template <int R, int N>
    static void tile(int k0, int k1, const int16_t* const* a, const int8_t* const* w, int64_t (*y)[4]) {
        __m512i acc[R][N];
        for (int r = 0; r < R; ++r)
            for (int n = 0; n < N; ++n) acc[r][n] = _mm512_setzero_si512();
        for (int k = k0; k < k1; k += kStep) {
            __m512i x[R];
            for (int r = 0; r < R; ++r) x[r] = _mm512_loadu_si512(a[r] + k);
            for (int n = 0; n < N; ++n) {
                const __m512i wn =
                    _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[n] + k)));
                for (int r = 0; r < R; ++r) acc[r][n] = _mm512_dpwssd_epi32(acc[r][n], x[r], wn);
            }
        }
        // 16 lanes of up to 2^28 each can pass int32 together: widen to int64 before the horizontal sum.
        for (int r = 0; r < R; ++r)
            for (int n = 0; n < N; ++n) {
                const __m512i lo = _mm512_cvtepi32_epi64(_mm512_castsi512_si256(acc[r][n]));
                const __m512i hi = _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(acc[r][n], 1));
                y[r][n] += _mm512_reduce_add_epi64(_mm512_add_epi64(lo, hi));
            }
    }
};

}  // namespace

void gemm_s16_avx512vnni(int T, int C, int K, const int16_t* a, int lda, const int8_t* b, int ldb, int64_t* y,
                         int ldy) {
    gemm16::gemm<Avx512VnniKernel>(T, C, K, a, lda, b, ldb, y, ldy);
}

}  // namespace edgeflow
