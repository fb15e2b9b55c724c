// A16 x INT8 -> INT64 matrix multiplication: the accelerator lane's matmul for linears with 16-bit activations
// (QNN HTP's A16W8, docs/quantized-artifact.md).
//
//   y[t, c] = sum_k a[t, k] * b[c, k]        t < T, c < C, k < K
//
// a: int16 activations [T, lda] (row t at a + t*lda), values in [-32767, 32767] (the A16 clamp);
// b: int8 weight codes [C, ldb], any int8 value; y: int64 [T, ldy], exact: |y| <= K * 32767 * 128 < 2^39 for the
// engine's K < 2^17, past int32 from K = 512 on. Kernels add int32 partial sums over blocks of kA16KBlock inputs
// (each int32 lane then holds at most kA16KBlock / 4 products of at most 2^22: < 2^30) and widen them to int64.
//
// Every SIMD kernel is checked bit-exact against gemm_s16_ref (tests/test_gemm16.cpp).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace edgeflow {

using Gemm16Fn = void (*)(int T, int C, int K, const int16_t* a, int lda, const int8_t* b, int ldb, int64_t* y,
                          int ldy);

struct Gemm16Kernel {
    const char* name;  // "ref", "avx2", "avx512-vnni", "neon"
    Gemm16Fn fn;
};

inline constexpr int kA16KBlock = 1024;

void gemm_s16_ref(int T, int C, int K, const int16_t* a, int lda, const int8_t* b, int ldb, int64_t* y, int ldy);

// Kernels this CPU can run, portable reference first (gemm_dispatch.cpp).
std::vector<Gemm16Kernel> available_gemm16_kernels();

// The fastest available kernel, or the one named by the environment variable EDGEFLOW_GEMM16 (error if unknown or
// unsupported here).
const Gemm16Kernel& best_gemm16_kernel();

}  // namespace edgeflow
