// AVX-512 VNNI A16 x INT8 GEMM (compiled with -mavx512f -mavx512bw -mavx512vnni; called only when the CPU has all
// three).
//
// vpdpwssd multiplies 32 int16 pairs and adds each adjacent pair of products into one of 16 int32 lanes of the
// accumulator in one instruction (AVX2's pmaddwd + paddd, at twice the width); it does not saturate (vpdpwssds
// would), so each block below is sized to keep every lane under 2^31. Products are at most 32767 * 128 < 2^22.
// Two paths, as the INT8 kernel's (gemm_avx512vnni.cpp):
//  - packed (T >= kPackedMinRows, the prefill): the call's weight rows are widened and repacked, 48 channels at a
//    time, so that one zmm holds 16 channels x 2 consecutive k as int16 (gemm_pack16.h pack_pairs16). Two int16
//    activations of row t, broadcast to all 16 lanes, times that vector add 2 products to each of 16 outputs: an
//    8-row x 3-group micro-tile keeps 24 accumulators live and needs no horizontal sum. A lane holds every product
//    of its channel, so the int32 sums are widened into the int64 outputs every kPackedKBlock inputs (2^8 products:
//    < 2^30).
//  - blocked (small T, e.g. decode): the AVX2 kernel's 2 rows x 4 channels tiles (gemm16_blocked.h) with the weights
//    widened as they are loaded (vpmovsxbw, 32 int8 -> 32 int16): a lane takes 2 products per step, so a block of
//    kA16KBlock inputs puts kA16KBlock / 16 products in a lane (< 2^28).
// GCC 12's AVX-512 headers pass an uninitialized "undefined" vector as the unused merge source of unmasked
// intrinsics, which -Wall reports at every inlined use (a false positive; gemm_avx512vnni.cpp says the same).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstring>

#include "gemm16.h"
#include "gemm16_blocked.h"
#include "gemm_pack16.h"

namespace edgeflow {
namespace {

constexpr int kPackedMinRows = 8;    // below this many rows the repack costs more than it saves
constexpr int kPackedKBlock = 256;   // inputs summed in int32 before widening (a lane: 256 products < 2^30)
constexpr int kBlockSteps = kPackedKBlock / 2;

// acc += the pairwise int16 dot products of u and s per int32 lane. Inline assembly for the reason
// gemm_avx512vnni.cpp gives for its dpbusd: GCC 12 spills many tied accumulators around the intrinsic.
static inline __attribute__((always_inline)) void dpwssd(__m512i& acc, __m512i u, __m512i s) {
    __asm__("vpdpwssd %2, %1, %0" : "+v"(acc) : "v"(u), "v"(s));
}

// y[0..8) (int64) += or = the 16 int32 lanes of acc, widened; only the lanes in `keep`.
template <bool kFirst>
inline void widen_into(int64_t* y, __m512i acc, __mmask16 keep) {
    const __m512i lo = _mm512_cvtepi32_epi64(_mm512_castsi512_si256(acc));
    const __m512i hi = _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(acc, 1));
    const __mmask8 klo = __mmask8(keep), khi = __mmask8(keep >> 8);
    if constexpr (kFirst) {
        _mm512_mask_storeu_epi64(y, klo, lo);
        _mm512_mask_storeu_epi64(y + 8, khi, hi);
    } else {
        _mm512_mask_storeu_epi64(y, klo, _mm512_add_epi64(_mm512_maskz_loadu_epi64(klo, y), lo));
        _mm512_mask_storeu_epi64(y + 8, khi, _mm512_add_epi64(_mm512_maskz_loadu_epi64(khi, y + 8), hi));
    }
}

// ---- packed path ----------------------------------------------------------------------------------------------

// One R x N micro-tile over steps [s0, s1) (at most kBlockSteps): rows a[0..R) against groups pw + n * gstride
// (n < N), into y[r, 16n + j] for j < 16 (the last group only the lanes in `last`). Every row holds 2 * s1 readable
// int16 (gemm_packed pads the activations when K is odd), so the step loop has no tail.
template <int R, int N, bool kFirst>
void packed_tile(int s0, int s1, const int16_t* a, int lda, const int16_t* pw, size_t gstride, int64_t* y, int ldy,
                 __mmask16 last) {
    __m512i acc[R][N];
#pragma GCC unroll 32
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 32
        for (int n = 0; n < N; ++n) acc[r][n] = _mm512_setzero_si512();
    for (int s = s0; s < s1; ++s) {
        __m512i w[N];
#pragma GCC unroll 32
        for (int n = 0; n < N; ++n) w[n] = _mm512_load_si512(pw + n * gstride + size_t(s) * 32);
#pragma GCC unroll 32
        for (int r = 0; r < R; ++r) {
            int32_t x2;
            std::memcpy(&x2, a + r * lda + 2 * s, 4);
            const __m512i xb = _mm512_set1_epi32(x2);  // a vpbroadcastd from memory
#pragma GCC unroll 32
            for (int n = 0; n < N; ++n) dpwssd(acc[r][n], w[n], xb);
        }
    }
#pragma GCC unroll 32
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 32
        for (int n = 0; n < N; ++n)
            widen_into<kFirst>(y + r * ldy + n * kGroup, acc[r][n], n + 1 == N ? last : __mmask16(0xFFFF));
}

// The micro-tiles of one group tile (gemm_pack16.h tile_all): rows t.. against the N groups at pw, over all steps,
// block after block.
struct PackedTile {
    int steps;
    const int16_t* a;
    int lda;
    const int16_t* pw;
    size_t gstride;
    int64_t* y;
    int ldy;
    __mmask16 last;

    template <int R, int N>
    void run(int t) const {
        const int16_t* at = a + size_t(t) * lda;
        int64_t* yt = y + size_t(t) * ldy;
        const int s1 = steps < kBlockSteps ? steps : kBlockSteps;
        packed_tile<R, N, true>(0, s1, at, lda, pw, gstride, yt, ldy, last);
        for (int s0 = s1; s0 < steps; s0 += kBlockSteps)
            packed_tile<R, N, false>(s0, steps - s0 < kBlockSteps ? steps : s0 + kBlockSteps, at, lda, pw, gstride, yt,
                                     ldy, last);
    }
};

void gemm_packed(int T, int C, int K, const int16_t* a, int lda, const int8_t* b, int ldb, int64_t* y, int ldy) {
    static thread_local Scratch scratch;
    const int steps = (K + 1) / 2;
    const size_t gstride = size_t(steps) * 32;  // int16 per packed group
    const size_t wbytes = kTileGroups * gstride * sizeof(int16_t);  // one group tile at a time: 96 * K bytes
    const bool pad = K % 2 != 0;  // rows copied to 2 * steps int16
    const size_t abytes = pad ? (size_t(T) * steps * 4 + 63) / 64 * 64 : 0;
    auto* pw = static_cast<int16_t*>(scratch.get(wbytes + abytes));
    if (pad) a = padded_rows(T, K, a, lda, steps * 2, pw + wbytes / sizeof(int16_t)), lda = steps * 2;
    for_group_tiles(C, [&](int c0, int nc, int ng, __mmask16 last) {
        pack_pairs16(nc, K, b + size_t(c0) * ldb, ldb, pw, steps);
        tile_all(ng, T, PackedTile{steps, a, lda, pw, gstride, y + c0, ldy, last});
    });
}

// ---- blocked path ---------------------------------------------------------------------------------------------

struct Avx512VnniKernel {
    static constexpr int kStep = 32;

    template <int R, int N>
    static void tile(int k0, int k1, const int16_t* const* a, const int8_t* const* w, int64_t (*y)[4]) {
        __m512i acc[R][N];
        for (int r = 0; r < R; ++r)
            for (int n = 0; n < N; ++n) acc[r][n] = _mm512_setzero_si512();
        for (int k = k0; k < k1; k += kStep) {
            __m512i x[R];
            for (int r = 0; r < R; ++r) x[r] = _mm512_loadu_si512(a[r] + k);
            for (int n = 0; n < N; ++n) {
                const __m512i wn =
                    _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[n] + k)));
                for (int r = 0; r < R; ++r) acc[r][n] = _mm512_dpwssd_epi32(acc[r][n], x[r], wn);
            }
        }
        // 16 lanes of up to 2^28 each can pass int32 together: widen to int64 before the horizontal sum.
        for (int r = 0; r < R; ++r)
            for (int n = 0; n < N; ++n) {
                const __m512i lo = _mm512_cvtepi32_epi64(_mm512_castsi512_si256(acc[r][n]));
                const __m512i hi = _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(acc[r][n], 1));
                y[r][n] += _mm512_reduce_add_epi64(_mm512_add_epi64(lo, hi));
            }
    }
};

}  // namespace

void gemm_s16_avx512vnni(int T, int C, int K, const int16_t* a, int lda, const int8_t* b, int ldb, int64_t* y,
                         int ldy) {
    if (T >= kPackedMinRows && C > 0 && K > 0)
        gemm_packed(T, C, K, a, lda, b, ldb, y, ldy);
    else
        gemm16::gemm<Avx512VnniKernel>(T, C, K, a, lda, b, ldb, y, ldy);
}

}  // namespace edgeflow
