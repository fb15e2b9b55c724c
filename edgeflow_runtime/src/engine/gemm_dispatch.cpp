// Which INT8 GEMM kernels this build and this CPU can run.
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "gemm.h"
#include "gemm16.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#elif defined(__aarch64__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif
#endif

namespace edgeflow {

#if defined(__x86_64__)
void gemm_s16_avx2(int, int, int, const int16_t*, int, const int8_t*, int, int64_t*, int);
void gemm_s8_avx2(int, int, int, const int8_t*, int, const int8_t*, int, int32_t*, int);
void gemm_s8_avxvnni(int, int, int, const int8_t*, int, const int8_t*, int, int32_t*, int);
void gemm_s8_avx512vnni(int, int, int, const int8_t*, int, const int8_t*, int, int32_t*, int);
void gemm_s8_amx(int, int, int, const int8_t*, int, const int8_t*, int, int32_t*, int);

// AMX-INT8 in CPUID (leaf 7: EDX bit 24 AMX-TILE, bit 25 AMX-INT8) is not enough: the OS must have enabled the tile
// state in XCR0 (bits 17, 18; valgrind's emulated CPU, for one, does not), and Linux gives a process the tile data
// only when asked (arch_prctl ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA, process-wide); a tile instruction without
// all three is SIGILL. Asked once, at the first dispatch.
static bool amx_usable() {
    unsigned eax, ebx, ecx, edx;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !(ecx & (1u << 27))) return false;  // OSXSAVE: xgetbv works
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) || !(edx & (1u << 24)) || !(edx & (1u << 25))) return false;
    unsigned xcr0_lo, xcr0_hi;
    __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
    if ((xcr0_lo & (3u << 17)) != (3u << 17)) return false;
    constexpr long kReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtiledata) == 0;
}
#elif defined(__aarch64__)
void gemm_s16_neon(int, int, int, const int16_t*, int, const int8_t*, int, int64_t*, int);
void gemm_s8_neon(int, int, int, const int8_t*, int, const int8_t*, int, int32_t*, int);
void gemm_s8_neon_sdot(int, int, int, const int8_t*, int, const int8_t*, int, int32_t*, int);
#endif

std::vector<GemmKernel> available_gemm_kernels() {
    std::vector<GemmKernel> ks{{"ref", gemm_s8_ref}};
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx2")) ks.push_back({"avx2", gemm_s8_avx2});
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("avxvnni")) ks.push_back({"avx-vnni", gemm_s8_avxvnni});
    // Later ones are the default where present: AVX-512 over AVX-VNNI (twice the width per instruction), AMX over
    // AVX-512 (a 16 x 16 x 64 tile product per instruction; it hands fewer than 16 rows to the AVX-512 kernel).
    const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
    if (avx512) ks.push_back({"avx512-vnni", gemm_s8_avx512vnni});
    static const bool amx = avx512 && amx_usable();
    if (amx) ks.push_back({"amx", gemm_s8_amx});
#elif defined(__aarch64__)
    ks.push_back({"neon", gemm_s8_neon});
    if (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) ks.push_back({"neon-sdot", gemm_s8_neon_sdot});
#endif
    return ks;
}

// The last kernel of `ks`, or the one the environment variable `env` names.
template <class K>
K chosen_kernel(const std::vector<K>& ks, const char* env) {
    const char* want = std::getenv(env);
    if (!want || !*want) return ks.back();
    std::string names;
    for (const auto& k : ks) {
        if (std::strcmp(k.name, want) == 0) return k;
        names += std::string(" ") + k.name;
    }
    throw std::runtime_error(std::string(env) + "=" + want + " is not available on this CPU (available:" + names + ")");
}

const GemmKernel& best_gemm_kernel() {
    static const GemmKernel chosen = chosen_kernel(available_gemm_kernels(), "EDGEFLOW_GEMM");
    return chosen;
}

// A16: AVX2 on every x86-64 host that has it (an AVX-512 kernel is not written yet), Neon on aarch64.
std::vector<Gemm16Kernel> available_gemm16_kernels() {
    std::vector<Gemm16Kernel> ks{{"ref", gemm_s16_ref}};
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx2")) ks.push_back({"avx2", gemm_s16_avx2});
#elif defined(__aarch64__)
    ks.push_back({"neon", gemm_s16_neon});
#endif
    return ks;
}

const Gemm16Kernel& best_gemm16_kernel() {
    static const Gemm16Kernel chosen = chosen_kernel(available_gemm16_kernels(), "EDGEFLOW_GEMM16");
    return chosen;
}

}  // namespace edgeflow
