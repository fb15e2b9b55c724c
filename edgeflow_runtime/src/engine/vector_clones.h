// EF_VECTOR_CLONES: a hot loop written to auto-vectorize is, on x86-64, also compiled for x86-64-v4 (AVX-512
// F/BW/DQ/VL) and for Haswell (AVX2 + FMA), one of the three picked at load time from CPUID (GCC function
// multi-versioning). Elsewhere the baseline ISA's vectors are used (Neon on aarch64). Clang has no target_clones.
#pragma once

#if defined(__x86_64__) && !defined(__clang__)
#define EF_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=haswell", "default")))
#else
#define EF_VECTOR_CLONES
#endif
