#include "cpu_features.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#elif defined(__aarch64__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif
#ifndef HWCAP_CRC32
#define HWCAP_CRC32 (1 << 7)
#endif
#endif

namespace edgeflow {

#if defined(__x86_64__)
// AMX-INT8 in CPUID (leaf 7: EDX bit 24 AMX-TILE, bit 25 AMX-INT8) is not enough: the OS must have enabled the tile
// state in XCR0 (bits 17, 18; valgrind's emulated CPU, for one, does not), and Linux gives a process the tile data
// only when asked (arch_prctl ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA, process-wide); a tile instruction without
// all three is SIGILL. Asked once, by cpu_features().
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
#endif

static CpuFeatures probe() {
    CpuFeatures f;
#if defined(__x86_64__)
    __builtin_cpu_init();
    f.avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    f.avx_vnni = f.avx2 && __builtin_cpu_supports("avxvnni");
    f.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl");
    f.avx512_vnni = f.avx512 && __builtin_cpu_supports("avx512vnni");
    f.amx = f.avx512_vnni && amx_usable();
    f.pclmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
#elif defined(__aarch64__)
    f.neon = true;
    f.sdot = getauxval(AT_HWCAP) & HWCAP_ASIMDDP;
    f.crc32 = getauxval(AT_HWCAP) & HWCAP_CRC32;
#endif
    return f;
}

const CpuFeatures& cpu_features() {
    static const CpuFeatures features = probe();
    return features;
}

}  // namespace edgeflow
