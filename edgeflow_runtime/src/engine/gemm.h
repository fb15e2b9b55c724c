// INT8 x INT8 -> INT32 matrix multiplication, the one operator the accelerator executor runs.
//
//   y[t, c] = sum_k a[t, k] * b[c, k]        t < T, c < C, k < K
//
// a: int8 activations [T, lda] (row t starts at a + t*lda), values in [-127, 127] (the contract's clamp);
// b: int8 weight codes [C, ldb], one row of K codes per output channel, any int8 value (-128 included);
// y: int32 [T, ldy]. Accumulation is exact: |y| <= K * 127 * 128 < 2^31 for K < 2^17.
//
// Every SIMD kernel is checked bit-exact against gemm_s8_ref (tests/test_gemm.cpp).
#pragma once
#include <cstdint>
#include <vector>

namespace edgeflow {

using GemmFn = void (*)(int T, int C, int K, const int8_t* a, int lda, const int8_t* b, int ldb, int32_t* y, int ldy);

struct GemmKernel {
    const char* name;  // "ref", "avx2", "avx-vnni", "avx512-vnni", "amx", "neon", "neon-sdot"
    GemmFn fn;
};

void gemm_s8_ref(int T, int C, int K, const int8_t* a, int lda, const int8_t* b, int ldb, int32_t* y, int ldy);

// Kernels this CPU can run, portable reference first. Defined per architecture in gemm_dispatch.cpp.
std::vector<GemmKernel> available_gemm_kernels();

// The fastest available kernel, or the one named by the environment variable EDGEFLOW_GEMM (error if unknown or
// unsupported here).
const GemmKernel& best_gemm_kernel();

}  // namespace edgeflow
