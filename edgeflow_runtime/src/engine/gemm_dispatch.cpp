// Which INT8 GEMM kernels this build and this CPU can run.
#include "cpu_features.h"
#include "gemm.h"
#include "gemm16.h"
#include "kernel_choice.h"

namespace edgeflow {

#if defined(__x86_64__)
void gemm_s16_avx2(int, int, int, const int16_t*, int, const int8_t*, int, int64_t*, int);
void gemm_s16_avx512vnni(int, int, int, const int16_t*, int, const int8_t*, int, int64_t*, int);
void gemm_s8_avx2(int, int, int, const int8_t*, int, const int8_t*, int, int32_t*, int);
void gemm_s8_avxvnni(int, int, int, const int8_t*, int, const int8_t*, int, int32_t*, int);
void gemm_s8_avx512vnni(int, int, int, const int8_t*, int, const int8_t*, int, int32_t*, int);
void gemm_s8_amx(int, int, int, const int8_t*, int, const int8_t*, int, int32_t*, int);
#elif defined(__aarch64__)
void gemm_s16_neon(int, int, int, const int16_t*, int, const int8_t*, int, int64_t*, int);
void gemm_s8_neon(int, int, int, const int8_t*, int, const int8_t*, int, int32_t*, int);
void gemm_s8_neon_sdot(int, int, int, const int8_t*, int, const int8_t*, int, int32_t*, int);
#endif

std::vector<GemmKernel> available_gemm_kernels() {
    const CpuFeatures& cpu = cpu_features();
    std::vector<GemmKernel> ks{{"ref", gemm_s8_ref}};
#if defined(__x86_64__)
    if (cpu.avx2) ks.push_back({"avx2", gemm_s8_avx2});
    if (cpu.avx_vnni) ks.push_back({"avx-vnni", gemm_s8_avxvnni});
    // Later ones are the default where present: AVX-512 over AVX-VNNI (twice the width per instruction), AMX over
    // AVX-512 (a 16 x 16 x 64 tile product per instruction; it hands fewer than 16 rows to the AVX-512 kernel).
    if (cpu.avx512_vnni) ks.push_back({"avx512-vnni", gemm_s8_avx512vnni});
    if (cpu.amx) ks.push_back({"amx", gemm_s8_amx});
#elif defined(__aarch64__)
    if (cpu.neon) ks.push_back({"neon", gemm_s8_neon});
    if (cpu.sdot) ks.push_back({"neon-sdot", gemm_s8_neon_sdot});
#endif
    return ks;
}

const GemmKernel& best_gemm_kernel() {
    static const GemmKernel chosen = choose_kernel(available_gemm_kernels(), "EDGEFLOW_GEMM");
    return chosen;
}

// A16: AVX2, then AVX-512 VNNI (vpdpwssd, twice the width) where present; Neon on aarch64. AVX-VNNI's 256-bit
// vpdpwssd has no kernel: it would only fuse AVX2's pmaddwd + paddd at the same width.
std::vector<Gemm16Kernel> available_gemm16_kernels() {
    std::vector<Gemm16Kernel> ks{{"ref", gemm_s16_ref}};
#if defined(__x86_64__)
    if (cpu_features().avx2) ks.push_back({"avx2", gemm_s16_avx2});
    if (cpu_features().avx512_vnni) ks.push_back({"avx512-vnni", gemm_s16_avx512vnni});
#elif defined(__aarch64__)
    if (cpu_features().neon) ks.push_back({"neon", gemm_s16_neon});
#endif
    return ks;
}

const Gemm16Kernel& best_gemm16_kernel() {
    static const Gemm16Kernel chosen = choose_kernel(available_gemm16_kernels(), "EDGEFLOW_GEMM16");
    return chosen;
}

}  // namespace edgeflow
