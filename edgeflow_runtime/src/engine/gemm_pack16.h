// What the packed x86 INT8 GEMM kernels share (gemm_avx512vnni.cpp, gemm_amx.cpp): weight rows regrouped as 16
// channels x 4 consecutive k per 64 bytes, the operand layout of both vpdpbusd against a broadcast activation dword
// and AMX's B tile, and the per-thread scratch they are packed into. Include only from a kernel's source file compiled
// with AVX-512 (F, BW); everything here is internal to that file (an unnamed namespace), so each kernel file
// keeps its own copy, compiled for its own instruction set.
#pragma once
#include <immintrin.h>

#include <cstdint>
#include <cstdlib>
#include <new>

namespace edgeflow {
namespace {

constexpr int kGroup = 16;  // channels per packed group: the int32 lanes of one zmm, the columns of an AMX C tile

// A 64-byte aligned buffer that only grows; one per thread, so concurrent calls (Forward::matmul splits the
// channels over a thread pool) never share it.
struct Scratch {
    void* p = nullptr;
    size_t n = 0;
    ~Scratch() { std::free(p); }
    void* get(size_t bytes) {
        if (bytes > n) {
            std::free(p);
            n = (bytes + 4095) / 4096 * 4096;
            p = std::aligned_alloc(64, n);
            if (!p) {
                n = 0;
                throw std::bad_alloc();
            }
        }
        return p;
    }
};

// Weight rows b[C, ldb] -> out: group g (channels 16g..16g+15), step s (k = 4s..4s+3) is the 64 bytes at
// out + (g * steps + s) * 64, byte 4j + i = w[16g + j][4s + i] (xor 0x80 when kOffset: w + 128 as u8, for vpdpbusd's
// unsigned side), and 0 past C or past K (a zero weight byte adds nothing whatever activation byte it meets).
// steps >= ceil(K / 4); the steps past K are all zero (AMX pads K to whole 64-byte tiles).
template <bool kOffset>
void pack_groups16(int C, int K, const int8_t* b, int ldb, uint8_t* out, int steps) {
    const int groups = (C + kGroup - 1) / kGroup;
    const int k16 = K / 16 * 16;  // k covered by the vector transpose (full 16-byte row pieces)
    const __m512i flip = _mm512_set1_epi8(kOffset ? char(0x80) : char(0));
    const uint8_t flip_byte = kOffset ? 0x80u : 0u;
    for (int g = 0; g < groups; ++g) {
        uint8_t* og = out + size_t(g) * steps * 64;
        const int8_t* bg = b + size_t(g) * kGroup * ldb;
        const int nc = C - g * kGroup < kGroup ? C - g * kGroup : kGroup;
        int k0 = 0;
        if (nc == kGroup) {
            // 16 rows x 16 bytes -> 4 steps. z[m] holds rows m, m + 4, m + 8, m + 12 in its 128-bit lanes, so after
            // a 4 x 4 transpose of dwords within each lane, lane l of step vector d holds rows 4l + 0..3: dword
            // 4l + m is row 4l + m, step d - every channel lands at its own lane position.
            for (; k0 < k16; k0 += 16) {
                __m512i z[4];
                for (int m = 0; m < 4; ++m) {
                    __m512i v = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bg + m * ldb + k0)));
                    v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(bg + (m + 4) * ldb + k0)), 1);
                    v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(bg + (m + 8) * ldb + k0)), 2);
                    v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(bg + (m + 12) * ldb + k0)), 3);
                    z[m] = v;
                }
                const __m512i t0 = _mm512_unpacklo_epi32(z[0], z[1]), t1 = _mm512_unpackhi_epi32(z[0], z[1]);
                const __m512i t2 = _mm512_unpacklo_epi32(z[2], z[3]), t3 = _mm512_unpackhi_epi32(z[2], z[3]);
                uint8_t* o = og + size_t(k0 / 4) * 64;
                _mm512_store_si512(o + 0, _mm512_xor_si512(_mm512_unpacklo_epi64(t0, t2), flip));
                _mm512_store_si512(o + 64, _mm512_xor_si512(_mm512_unpackhi_epi64(t0, t2), flip));
                _mm512_store_si512(o + 128, _mm512_xor_si512(_mm512_unpacklo_epi64(t1, t3), flip));
                _mm512_store_si512(o + 192, _mm512_xor_si512(_mm512_unpackhi_epi64(t1, t3), flip));
            }
        }
        // The rest (K % 16 tail, steps past K, or a group with fewer than 16 channels): byte by byte, zero padded.
        for (int s = k0 / 4; s < steps; ++s)
            for (int j = 0; j < kGroup; ++j)
                for (int i = 0; i < 4; ++i) {
                    const int k = 4 * s + i;
                    og[size_t(s) * 64 + 4 * j + i] =
                        (j < nc && k < K) ? uint8_t(uint8_t(bg[size_t(j) * ldb + k]) ^ flip_byte) : uint8_t(0);
                }
    }
}

}  // namespace
}  // namespace edgeflow
