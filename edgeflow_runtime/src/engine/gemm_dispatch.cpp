// Which INT8 GEMM kernels this build and this CPU can run.
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "gemm.h"

#if defined(__aarch64__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif
#endif

namespace edgeflow {

#if defined(__x86_64__)
void gemm_s8_avx2(int, int, int, const int8_t*, int, const int8_t*, int, int32_t*, int);
void gemm_s8_avxvnni(int, int, int, const int8_t*, int, const int8_t*, int, int32_t*, int);
void gemm_s8_avx512vnni(int, int, int, const int8_t*, int, const int8_t*, int, int32_t*, int);
#elif defined(__aarch64__)
void gemm_s8_neon(int, int, int, const int8_t*, int, const int8_t*, int, int32_t*, int);
void gemm_s8_neon_sdot(int, int, int, const int8_t*, int, const int8_t*, int, int32_t*, int);
#endif

std::vector<GemmKernel> available_gemm_kernels() {
    std::vector<GemmKernel> ks{{"ref", gemm_s8_ref}};
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx2")) ks.push_back({"avx2", gemm_s8_avx2});
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("avxvnni")) ks.push_back({"avx-vnni", gemm_s8_avxvnni});
    // Last, so it is the default where present (also on CPUs that have AVX-VNNI too: twice the width per instruction).
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni"))
        ks.push_back({"avx512-vnni", gemm_s8_avx512vnni});
#elif defined(__aarch64__)
    ks.push_back({"neon", gemm_s8_neon});
    if (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) ks.push_back({"neon-sdot", gemm_s8_neon_sdot});
#endif
    return ks;
}

const GemmKernel& best_gemm_kernel() {
    static const GemmKernel chosen = [] {
        const auto ks = available_gemm_kernels();
        const char* want = std::getenv("EDGEFLOW_GEMM");
        if (!want || !*want) return ks.back();
        std::string names;
        for (const auto& k : ks) {
            if (std::strcmp(k.name, want) == 0) return k;
            names += std::string(" ") + k.name;
        }
        throw std::runtime_error(std::string("EDGEFLOW_GEMM=") + want + " is not available on this CPU (available:" +
                                 names + ")");
    }();
    return chosen;
}

}  // namespace edgeflow
