// The loop nest shared by the SIMD INT8 GEMM kernels (gemm.h): 16-channel blocks whose weight rows stay in L1 while
// every activation row streams past, rows in fours with a one-row remainder, channels in tiles of Kernel::kN with a
// one-channel remainder. A kernel supplies `template <int R, int N> static void tile(K, a, lda, b, ldb, y, ldy)`
// computing one R x N tile of y; it may leave K % (its vector width) to dot_tail.
//
// Include only from a kernel's own source file, with Kernel in an anonymous namespace: each file is compiled for
// its own instruction set, and internal Kernel types keep the instantiations apart.
#pragma once
#include <cstdint>

namespace edgeflow {

// sum_{k0 <= k < K} a[k] * b[k]: the part of a dot product that does not fill a vector. static: every kernel file
// gets its own copy, compiled for that file's instruction set (an inline one would be merged by the linker).
static inline int32_t dot_tail(const int8_t* a, const int8_t* b, int k0, int K) {
    int32_t s = 0;
    for (int k = k0; k < K; ++k) s += int32_t(a[k]) * int32_t(b[k]);
    return s;
}

template <class Kernel, int R>
inline void gemm_row_block(int C, int K, const int8_t* a, int lda, const int8_t* b, int ldb, int32_t* y, int ldy) {
    constexpr int N = Kernel::kN;
    int c = 0;
    for (; c + N <= C; c += N) Kernel::template tile<R, N>(K, a, lda, b + c * ldb, ldb, y + c, ldy);
    for (; c < C; ++c) Kernel::template tile<R, 1>(K, a, lda, b + c * ldb, ldb, y + c, ldy);
}

template <class Kernel>
inline void gemm_blocked(int T, int C, int K, const int8_t* a, int lda, const int8_t* b, int ldb, int32_t* y,
                         int ldy) {
    constexpr int kCBlock = 16;  // 16 weight rows: 9 KB at K = 576
    for (int c0 = 0; c0 < C; c0 += kCBlock) {
        const int nc = C - c0 < kCBlock ? C - c0 : kCBlock;
        const int8_t* bb = b + c0 * ldb;
        int t = 0;
        for (; t + 4 <= T; t += 4) gemm_row_block<Kernel, 4>(nc, K, a + t * lda, lda, bb, ldb, y + t * ldy + c0, ldy);
        for (; t < T; ++t) gemm_row_block<Kernel, 1>(nc, K, a + t * lda, lda, bb, ldb, y + t * ldy + c0, ldy);
    }
}

}  // namespace edgeflow
