// AVX-512 VNNI INT8 GEMM (compiled with -mavx512f -mavx512bw -mavx512vl -mavx512vnni; called only when the CPU has
// all four).
//
// vpdpbusd multiplies unsigned by signed bytes and adds each group of four products into an int32 lane, with no
// 16-bit intermediate, so nothing saturates. Here the weights take the unsigned side, offset by 128 (an xor with
// 0x80: w + 128 is in [0, 255] for every int8 w, -128 included), and the activations stay signed:
//   sum_k x[k] w[k] = sum_k x[k] (w[k] + 128) - 128 * sum_k x[k]
// so the correction is one int32 per activation row, shared by every channel. Keeping the activations signed lets
// them be the instruction's broadcast operand (vpdpbusd zmm, zmm, m32{1to16}: only the signed source can come from
// memory), which is what the packed micro-kernel needs.
//
// Two paths:
//  - packed (T >= kPackedMinRows, the prefill): the call's weight rows are repacked, 48 channels at a time, into a
//    small per-thread scratch so that one zmm holds 16 channels x 4 consecutive k (byte 4j + i = channel j, k + i).
//    Four activation bytes of row t, broadcast to all 16 lanes, times that vector add 16 outputs' worth of 4
//    products: y[t, 16 channels] accumulates in one register and no horizontal sum is needed. An R x N micro-tile
//    (R rows, N groups of 16 channels) keeps R*N accumulators live; per 4 k it loads N weight vectors and R
//    broadcasts for R*N vpdpbusd. The repack is O(C*K) against O(T*C*K) multiply-adds: cheap at prefill chunk sizes.
//  - direct (small T, e.g. decode's T = 1, where repacking would cost as much as the products): 64-byte dot
//    products straight from the operands, channel after channel in address order so that the weights stream at
//    memory bandwidth, one horizontal sum per output.
// Tails: K not a multiple of 4 (or 64) and C not a multiple of 16 are zero-padded in the packed scratch or masked
// in the direct loads; any T is handled by smaller tiles. Every path is checked bit-exact in tests/test_gemm.cpp.
// GCC 12's AVX-512 headers pass an uninitialized "undefined" vector as the unused merge source of unmasked
// intrinsics, which -Wall reports at every inlined use (a false positive).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include "gemm.h"
#include "gemm_pack16.h"

namespace edgeflow {
namespace {

constexpr int kPackedMinRows = 8;   // below this many rows the repack costs more than it saves

// sum_{k < K} x[k] for one activation row: vpdpbusd of ones (unsigned) by x (signed), masked tail load.
int32_t row_sum(const int8_t* x, int K) {
    const __m512i ones = _mm512_set1_epi8(1);
    __m512i acc = _mm512_setzero_si512();
    int k = 0;
    for (; k + 64 <= K; k += 64) acc = _mm512_dpbusd_epi32(acc, ones, _mm512_loadu_si512(x + k));
    if (k < K) acc = _mm512_dpbusd_epi32(acc, ones, _mm512_maskz_loadu_epi8(~0ULL >> (64 - (K - k)), x + k));
    return _mm512_reduce_add_epi32(acc);
}

// acc += the four-byte dot products of u (unsigned) and s (signed) per int32 lane. Inline assembly rather than
// _mm512_dpbusd_epi32: with many accumulators GCC 12 copies each one to a scratch register and to the stack around
// the intrinsic (the tied accumulator confuses its register allocator); "+v" states the tie directly.
static inline __attribute__((always_inline)) void dpbusd(__m512i& acc, __m512i u, __m512i s) {
    __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "v"(s));
}

// ---- packed path ----------------------------------------------------------------------------------------------

// One R x N micro-tile: rows a[0..R) against groups pw + n * gstride (n < N), y[r, 16n + j] for j < 16 (the last
// group stores only the lanes in `last`). corr[r] = 128 * row_sum(row r). Every row holds steps * 4 readable bytes
// (gemm_packed pads the activations when K % 4 != 0), so the k loop has no tail: a tail block after it makes GCC
// keep the accumulators in memory.
// Not inlined: inlined into PackedTile::run (tile_all's functor) GCC 12 schedules the loop worse, 4% below this on
// the default model's matmuls (AVX-512 EPYC, one core: 0.88 of vpdpbusd's peak against 0.92).
template <int R, int N>
__attribute__((noinline)) void packed_tile(int steps, const int8_t* a, int lda, const uint8_t* pw, size_t gstride,
                                           const int32_t* corr, int32_t* y, int ldy, __mmask16 last) {
    __m512i acc[R][N];
    #pragma GCC unroll 32
    for (int r = 0; r < R; ++r)
        #pragma GCC unroll 32
        for (int n = 0; n < N; ++n) acc[r][n] = _mm512_setzero_si512();
    for (int s = 0; s < steps; ++s) {
        __m512i w[N];
#pragma GCC unroll 32
        for (int n = 0; n < N; ++n) w[n] = _mm512_load_si512(pw + n * gstride + size_t(s) * 64);
#pragma GCC unroll 32
        for (int r = 0; r < R; ++r) {
            int32_t x4;
            std::memcpy(&x4, a + r * lda + 4 * s, 4);
            const __m512i xb = _mm512_set1_epi32(x4);  // a vpbroadcastd from memory
#pragma GCC unroll 32
            for (int n = 0; n < N; ++n) dpbusd(acc[r][n], w[n], xb);
        }
    }
    #pragma GCC unroll 32
    for (int r = 0; r < R; ++r) {
        const __m512i c = _mm512_set1_epi32(corr[r]);
        #pragma GCC unroll 32
        for (int n = 0; n + 1 < N; ++n) _mm512_storeu_si512(y + r * ldy + n * kGroup, _mm512_sub_epi32(acc[r][n], c));
        _mm512_mask_storeu_epi32(y + r * ldy + (N - 1) * kGroup, last, _mm512_sub_epi32(acc[r][N - 1], c));
    }
}

// The micro-tiles of one group tile (gemm_pack16.h tile_all): rows t.. against the N groups at pw.
struct PackedTile {
    int steps;
    const int8_t* a;
    int lda;
    const uint8_t* pw;
    size_t gstride;
    const int32_t* corr;
    int32_t* y;
    int ldy;
    __mmask16 last;

    template <int R, int N>
    void run(int t) const {
        packed_tile<R, N>(steps, a + size_t(t) * lda, lda, pw, gstride, corr + t, y + size_t(t) * ldy, ldy, last);
    }
};

void gemm_packed(int T, int C, int K, const int8_t* a, int lda, const int8_t* b, int ldb, int32_t* y, int ldy) {
    static thread_local Scratch scratch;
    const int steps = (K + 3) / 4;
    const size_t gstride = size_t(steps) * 64;
    const size_t wbytes = kTileGroups * gstride;  // one group tile at a time: 48 * K bytes, L1 or L2
    const bool pad = K % 4 != 0;  // rows copied to steps * 4 bytes
    const size_t abytes = pad ? (size_t(T) * steps * 4 + 63) / 64 * 64 : 0;
    uint8_t* pw = static_cast<uint8_t*>(scratch.get(wbytes + abytes + size_t(T) * sizeof(int32_t)));
    int32_t* corr = reinterpret_cast<int32_t*>(pw + wbytes + abytes);
    for (int t = 0; t < T; ++t) corr[t] = 128 * row_sum(a + size_t(t) * lda, K);
    if (pad) a = padded_rows(T, K, a, lda, steps * 4, reinterpret_cast<int8_t*>(pw + wbytes)), lda = steps * 4;
    for_group_tiles(C, [&](int c0, int nc, int ng, __mmask16 last) {
        pack_groups16<true>(nc, K, b + size_t(c0) * ldb, ldb, pw, steps);
        tile_all(ng, T, PackedTile{steps, a, lda, pw, gstride, corr, y + c0, ldy, last});
    });
}

// ---- direct path ----------------------------------------------------------------------------------------------

// R outputs of one channel as dot products over 64-byte pieces: the channel's weights loaded once per piece and
// offset (xor 0x80) for all R rows. The K % 64 tail is a masked (zeroing) load on both sides: a zero activation byte
// adds nothing whatever the offset weight byte is. corr[r] = 128 * row_sum(row r).
template <int R>
void direct_channel(int K, const int8_t* a, int lda, const int8_t* w, const int32_t* corr, int32_t* y, int ldy) {
    __m512i acc[R];
    #pragma GCC unroll 32
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_si512();
    const __m512i flip = _mm512_set1_epi8(char(0x80));
    for (int k = 0; k < K; k += 64) {
        const __mmask64 m = K - k >= 64 ? ~__mmask64(0) : ~__mmask64(0) >> (64 - (K - k));
        const __m512i wk = _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, w + k), flip);
        #pragma GCC unroll 32
        for (int r = 0; r < R; ++r) dpbusd(acc[r], wk, _mm512_maskz_loadu_epi8(m, a + r * lda + k));
    }
    #pragma GCC unroll 32
    for (int r = 0; r < R; ++r) y[r * ldy] = _mm512_reduce_add_epi32(acc[r]) - corr[r];
}

// Channel after channel, in address order: the weights are one sequential stream, which the hardware prefetcher
// follows at full memory bandwidth. Tiles of 4 channels (4 interleaved short streams, one per channel row) read at
// half of it (measured on the default model's 210 linears, T = 1, 1 thread: 11 against 25 GB/s; a streaming read
// here is 23 GB/s), and decode is memory-bound.
template <int R>
void direct_rows(int C, int K, const int8_t* a, int lda, const int8_t* b, int ldb, const int32_t* corr, int32_t* y,
                 int ldy) {
    for (int c = 0; c < C; ++c) direct_channel<R>(K, a, lda, b + size_t(c) * ldb, corr, y + c, ldy);
}

void gemm_direct(int T, int C, int K, const int8_t* a, int lda, const int8_t* b, int ldb, int32_t* y, int ldy) {
    int32_t corr[4];
    int t = 0;
    for (; t + 4 <= T; t += 4) {
        for (int r = 0; r < 4; ++r) corr[r] = 128 * row_sum(a + size_t(t + r) * lda, K);
        direct_rows<4>(C, K, a + size_t(t) * lda, lda, b, ldb, corr, y + size_t(t) * ldy, ldy);
    }
    for (; t < T; ++t) {
        corr[0] = 128 * row_sum(a + size_t(t) * lda, K);
        direct_rows<1>(C, K, a + size_t(t) * lda, lda, b, ldb, corr, y + size_t(t) * ldy, ldy);
    }
}

}  // namespace

void gemm_s8_avx512vnni(int T, int C, int K, const int8_t* a, int lda, const int8_t* b, int ldb, int32_t* y,
                        int ldy) {
    if (T <= 0 || C <= 0) return;
    if (K <= 0) {
        for (int t = 0; t < T; ++t)
            for (int c = 0; c < C; ++c) y[size_t(t) * ldy + c] = 0;
        return;
    }
    if (T >= kPackedMinRows)
        gemm_packed(T, C, K, a, lda, b, ldb, y, ldy);
    else
        gemm_direct(T, C, K, a, lda, b, ldb, y, ldy);
}

}  // namespace edgeflow
