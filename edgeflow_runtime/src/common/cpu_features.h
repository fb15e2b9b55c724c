// What this CPU can run, probed once (the one place that asks CPUID / AT_HWCAP): every kernel list (GEMM, GEMM16,
// attention, LM head, unpack, CRC-32) reads it, so a feature means the same everywhere.
#pragma once

namespace edgeflow {

struct CpuFeatures {
    bool avx2 = false;         // with FMA and the rest of the x86-64-v3 set our AVX2 kernels are compiled for
    bool avx_vnni = false;     // AVX-VNNI (vpdpbusd on ymm), with AVX2
    bool avx512 = false;       // AVX-512 F + BW + VL (every AVX-512 kernel here needs the three)
    bool avx512_vnni = false;  // AVX-512 VNNI, with avx512
    bool amx = false;          // AMX-TILE + AMX-INT8 with the OS's tile state granted to this process
    bool pclmul = false;       // PCLMULQDQ with SSE4.1 (carry-less multiply: the CRC-32 folding kernel)
    bool neon = false;         // aarch64 Advanced SIMD (always there)
    bool sdot = false;         // aarch64 dot product (asimddp)
    bool crc32 = false;        // aarch64 CRC32 instructions (zlib's polynomial)
};

const CpuFeatures& cpu_features();

}  // namespace edgeflow
