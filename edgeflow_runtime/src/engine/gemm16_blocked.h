// The loop nest the SIMD A16 x INT8 kernels share (gemm16.h): tiles of up to 2 activation rows x 4 channels, each
// tile's products summed by the kernel in int32 lanes over blocks of kA16KBlock inputs and widened to int64 here;
// inputs past the last multiple of the kernel's step are added in scalar code.
//
// A kernel is a type with kStep (inputs per vector step) and
//   template <int R, int N> static void tile(int k0, int k1, const int16_t* const* a, const int8_t* const* w,
//                                            int64_t (*y)[4]);
// which adds sum over k in [k0, k1) of a[r][k] * w[n][k] to y[r][n] (k1 - k0 a multiple of kStep, at most
// kA16KBlock).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "gemm16.h"

namespace edgeflow::gemm16 {

// Channels c .. c + N - 1 of R rows: out rows y[r], channel c at y[r][c].
template <class Kernel, int R, int N>
void channels(int c, int K, const int16_t* const* a, const int8_t* b, int ldb, int64_t* const* y) {
    const int8_t* w[N];
    for (int n = 0; n < N; ++n) w[n] = b + size_t(c + n) * ldb;
    int64_t sums[R][4] = {};
    const int K_vec = K / Kernel::kStep * Kernel::kStep;
    for (int k0 = 0; k0 < K_vec; k0 += kA16KBlock)
        Kernel::template tile<R, N>(k0, std::min(K_vec, k0 + kA16KBlock), a, w, sums);
    for (int r = 0; r < R; ++r)
        for (int n = 0; n < N; ++n) {
            int64_t s = sums[r][n];
            for (int k = K_vec; k < K; ++k) s += int64_t(a[r][k]) * int64_t(w[n][k]);
            y[r][c + n] = s;
        }
}

template <class Kernel, int R>
void rows(int C, int K, const int16_t* const* a, const int8_t* b, int ldb, int64_t* const* y) {
    int c = 0;
    for (; c + 4 <= C; c += 4) channels<Kernel, R, 4>(c, K, a, b, ldb, y);
    for (; c < C; ++c) channels<Kernel, R, 1>(c, K, a, b, ldb, y);
}

template <class Kernel>
void gemm(int T, int C, int K, const int16_t* a, int lda, const int8_t* b, int ldb, int64_t* y, int ldy) {
    int t = 0;
    for (; t + 2 <= T; t += 2) {
        const int16_t* ar[2] = {a + size_t(t) * lda, a + size_t(t + 1) * lda};
        int64_t* yr[2] = {y + size_t(t) * ldy, y + size_t(t + 1) * ldy};
        rows<Kernel, 2>(C, K, ar, b, ldb, yr);
    }
    if (t < T) {
        const int16_t* ar[1] = {a + size_t(t) * lda};
        int64_t* yr[1] = {y + size_t(t) * ldy};
        rows<Kernel, 1>(C, K, ar, b, ldb, yr);
    }
}

}  // namespace edgeflow::gemm16
