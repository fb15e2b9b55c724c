// What the packed x86 GEMM kernels share (gemm_avx512vnni.cpp, gemm_amx.cpp, gemm16_avx512vnni.cpp): weight rows
// regrouped as 16 channels x 4 consecutive k per 64 bytes, the operand layout of both vpdpbusd against a broadcast
// activation dword and AMX's B tile; the A16 kernel's 16 channels x 2 consecutive k widened to int16 (vpdpwssd's);
// and the per-thread scratch they are packed into. Include only from a kernel's source file compiled
// with AVX-512 (F, BW); everything here is internal to that file (an unnamed namespace), so each kernel file
// keeps its own copy, compiled for its own instruction set.
#pragma once
#include <immintrin.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

namespace edgeflow {
namespace {

constexpr int kGroup = 16;  // channels per packed group: the int32 lanes of one zmm, the columns of an AMX C tile
// The vpdpbusd / vpdpwssd micro-tile: 8 rows x 3 groups = 24 accumulators + 3 weights + 1 broadcast of the 32 zmm
// registers.
constexpr int kTileRows = 8;
constexpr int kTileGroups = 3;

// Every micro-tile of T rows x ng groups (ng <= kTileGroups) of the vpdpbusd / vpdpwssd kernels: rows in tiles of
// kTileRows, then one tile of the rest, all ng groups at once. A tile is tile.template run<R, N>(t) (rows t .. t + R
// - 1, groups 0 .. N - 1): R and N are compile-time, so the kernel keeps its R x N accumulators in registers.
template <int N, int R = kTileRows - 1, class Tile>
void tile_row_tail(int rem, int t, const Tile& tile) {
    if (rem == R) return tile.template run<R, N>(t);
    if constexpr (R > 1) tile_row_tail<N, R - 1>(rem, t, tile);
}

template <int N, class Tile>
void tile_rows(int T, const Tile& tile) {
    int t = 0;
    for (; t + kTileRows <= T; t += kTileRows) tile.template run<kTileRows, N>(t);
    if (t < T) tile_row_tail<N>(T - t, t, tile);
}

template <int N = kTileGroups, class Tile>
void tile_all(int ng, int T, const Tile& tile) {
    if (ng == N) return tile_rows<N>(T, tile);
    if constexpr (N > 1) tile_all<N - 1>(ng, T, tile);
}

// C channels as tiles of up to kTileGroups groups: f(c0, nc, ng, last) for the tile of channels c0 .. c0 + nc - 1
// (ng groups; `last`: the lanes of its last group that hold channels). Each tile's weights are packed just before use
// and stream past every row tile, whose activations (8 rows x K) stay in L1.
template <class F>
void for_group_tiles(int C, F&& f) {
    const int groups = (C + kGroup - 1) / kGroup, rem = C % kGroup;
    const __mmask16 partial = rem ? __mmask16((1u << rem) - 1) : __mmask16(0xFFFF);
    for (int g = 0; g < groups; g += kTileGroups) {
        const int ng = groups - g < kTileGroups ? groups - g : kTileGroups;
        const int c0 = g * kGroup, nc = C - c0 < ng * kGroup ? C - c0 : ng * kGroup;
        f(c0, nc, ng, g + ng == groups ? partial : __mmask16(0xFFFF));
    }
}

// Rows a[T, lda] of K values copied to rows of `width` >= K values at out, zero padded (so that the micro-kernels'
// broadcasts of whole steps never read past a row). Returns out; its row stride is `width`.
template <class Act>
const Act* padded_rows(int T, int K, const Act* a, int lda, int width, Act* out) {
    for (int t = 0; t < T; ++t) {
        std::memcpy(out + size_t(t) * width, a + size_t(t) * lda, size_t(K) * sizeof(Act));
        std::memset(out + size_t(t) * width + K, 0, size_t(width - K) * sizeof(Act));
    }
    return out;
}

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

// 16 pieces of 16 bytes (piece[j]: channel j's, as 4 dwords) -> 4 vectors of 64 bytes at o, o + 64, ...: dword j of
// vector d is dword d of piece[j] (a 16 x 4 transpose of dwords), xor flip.
inline void transpose16x4_dwords(const __m128i* piece, uint8_t* o, __m512i flip) {
    // z[m] holds pieces m, m + 4, m + 8, m + 12 in its 128-bit lanes, so after a 4 x 4 transpose of dwords within each
    // lane, lane l of vector d holds pieces 4l + 0..3: dword 4l + m is piece 4l + m's dword d.
    __m512i z[4];
    for (int m = 0; m < 4; ++m) {
        __m512i v = _mm512_castsi128_si512(piece[m]);
        v = _mm512_inserti32x4(v, piece[m + 4], 1);
        v = _mm512_inserti32x4(v, piece[m + 8], 2);
        z[m] = _mm512_inserti32x4(v, piece[m + 12], 3);
    }
    const __m512i t0 = _mm512_unpacklo_epi32(z[0], z[1]), t1 = _mm512_unpackhi_epi32(z[0], z[1]);
    const __m512i t2 = _mm512_unpacklo_epi32(z[2], z[3]), t3 = _mm512_unpackhi_epi32(z[2], z[3]);
    _mm512_store_si512(o + 0, _mm512_xor_si512(_mm512_unpacklo_epi64(t0, t2), flip));
    _mm512_store_si512(o + 64, _mm512_xor_si512(_mm512_unpackhi_epi64(t0, t2), flip));
    _mm512_store_si512(o + 128, _mm512_xor_si512(_mm512_unpacklo_epi64(t1, t3), flip));
    _mm512_store_si512(o + 192, _mm512_xor_si512(_mm512_unpackhi_epi64(t1, t3), flip));
}

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
        if (nc == kGroup)
            for (; k0 < k16; k0 += 16) {  // 16 rows x 16 bytes -> 4 steps
                __m128i piece[kGroup];
                for (int j = 0; j < kGroup; ++j)
                    piece[j] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bg + j * ldb + k0));
                transpose16x4_dwords(piece, og + size_t(k0 / 4) * 64, flip);
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

// The A16 layout (vpdpwssd against a broadcast pair of int16 activations): weight rows b[C, ldb] -> out, group g,
// step s (k = 2s, 2s + 1) is the 64 bytes at out + (g * steps + s) * 64, int16 2j + i = w[16g + j][2s + i] widened,
// and 0 past C or past K. steps >= ceil(K / 2).
inline void pack_pairs16(int C, int K, const int8_t* b, int ldb, int16_t* out, int steps) {
    const int groups = (C + kGroup - 1) / kGroup;
    const int k8 = K / 8 * 8;  // k covered by the vector transpose (8 weights widen to a 16-byte piece)
    const __m512i none = _mm512_setzero_si512();
    for (int g = 0; g < groups; ++g) {
        int16_t* og = out + size_t(g) * steps * 32;
        const int8_t* bg = b + size_t(g) * kGroup * ldb;
        const int nc = C - g * kGroup < kGroup ? C - g * kGroup : kGroup;
        int k0 = 0;
        if (nc == kGroup)
            for (; k0 < k8; k0 += 8) {  // 16 rows x 8 weights -> 4 steps
                __m128i piece[kGroup];
                for (int j = 0; j < kGroup; ++j)
                    piece[j] = _mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(bg + j * ldb + k0)));
                transpose16x4_dwords(piece, reinterpret_cast<uint8_t*>(og + size_t(k0 / 2) * 32), none);
            }
        for (int s = k0 / 2; s < steps; ++s)
            for (int j = 0; j < kGroup; ++j)
                for (int i = 0; i < 2; ++i) {
                    const int k = 2 * s + i;
                    og[size_t(s) * 32 + 2 * j + i] = (j < nc && k < K) ? int16_t(bg[size_t(j) * ldb + k]) : int16_t(0);
                }
    }
}

}  // namespace
}  // namespace edgeflow
