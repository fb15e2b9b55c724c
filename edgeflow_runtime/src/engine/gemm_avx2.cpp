// AVX2 INT8 GEMM (compiled with -mavx2; called only when the CPU has AVX2).
//
// pmaddubsw multiplies unsigned by signed bytes and adds adjacent pairs into saturating int16. With signed data on
// both sides it gets u = |w| (<= 128 fits a byte) and s = sign(x, w) = x * sgn(w): with x in [-127, 127] a pair is
// at most 2 * 128 * 127 = 32512 and never saturates (|x| and sign(w, x) would turn w = -128 into +128 * -1).
// pmaddwd by ones widens the pairs to int32. Four instructions per 32 multiply-adds.
//
// Narrow weights: a channel stored with <= 7 bits has |w| <= 64, and then the offset form pmaddubsw(x + 128, w)
// cannot saturate either (a pair is at most 2 * 255 * 64 = 32640); the offset comes off as 128 * sum_k w:
//   sum_k x[k] w[k] = sum_k (x[k] + 128) w[k] - 128 * sum_k w[k]
// x + 128 is one xor per loaded activation vector, shared by every weight row of the tile, so a step is three
// instructions (pmaddubsw, pmaddwd, paddd) instead of four; at 6 and 5 bits (|w| <= 32, 16) two and four steps'
// pairs add up in int16 (paddw) before one pmaddwd + paddd. Which channels qualify is read off the codes: each
// channel of a 16-channel block is scanned for max |w| (and its row sum) when the kernel runs - O(C * K) against
// O(T * C * K) multiply-adds - so the answer is exact whatever bit width the file declared, and per channel:
// EdgeFlow's mixed-width layers put 8-bit channels among narrow ones, so a per-block decision would rarely hold.
#include <type_traits>

#include "gemm.h"
#include "gemm_blocked.h"
#include "gemm_x86.h"

namespace edgeflow {
namespace {

// acc += the 32 products u x s (u unsigned, s signed), summed in fours into the int32 lanes.
inline __m256i dot(__m256i acc, __m256i u, __m256i s) {
    const __m256i pairs = _mm256_maddubs_epi16(u, s);
    return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
}

// Tiles of y: R activation rows (a, lda) against N channels cols[0..N) of a block (weight row b + cols[n] * ldb,
// output column y + cols[n]).

// The sign form, any int8 weights. 4 x 2 keeps 8 accumulators, 2 weights, 2 |weights| and one activation vector
// in the 16 ymm registers.
template <int R, int N>
void sign_tile(int K, const int8_t* a, int lda, const int8_t* b, int ldb, const int* cols, int32_t* y, int ldy) {
    const int8_t* wr[N];
    for (int n = 0; n < N; ++n) wr[n] = b + cols[n] * ldb;
    __m256i acc[R][N];
    for (int r = 0; r < R; ++r)
        for (int n = 0; n < N; ++n) acc[r][n] = _mm256_setzero_si256();
    int k = 0;
    for (; k + 32 <= K; k += 32) {
        __m256i w[N], aw[N];
        for (int n = 0; n < N; ++n) {
            w[n] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wr[n] + k));
            aw[n] = _mm256_abs_epi8(w[n]);
        }
        for (int r = 0; r < R; ++r) {
            const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + r * lda + k));
            for (int n = 0; n < N; ++n) acc[r][n] = dot(acc[r][n], aw[n], _mm256_sign_epi8(x, w[n]));
        }
    }
    for (int r = 0; r < R; ++r)
        for (int n = 0; n < N; ++n)
            y[r * ldy + cols[n]] = hsum_epi32(acc[r][n]) + dot_tail(a + r * lda, wr[n], k, K);
}

// The offset form for narrow channels (|w| <= 64 for k < K / 32 * 32): sum_k (x + 128) w - corr[cols[n]],
// corr[c] = 128 * sum_k w of channel c. Narrower channels add S steps' pmaddubsw pairs in int16 before widening
// them (exact: a pair is at most 2 * 255 * |w|, so S = 4 at |w| <= 16 (5 bits), S = 2 at |w| <= 32 (6 bits), and
// S = 1 at |w| <= 64 sums at most 32640), which saves the pmaddwd + paddd of S - 1 steps in S. (An eight-step form
// at |w| <= 8 measured no faster than S = 4 on 4-bit codes, so there is none.)
// S = 1 runs 4 x 3 tiles (12 accumulators, 3 weight vectors and the offset activation vector in registers); S > 1
// runs 2 x 3 (6 int16 sums, 6 int32 accumulators), its steps kept as a loop. What GCC 12 makes of that loop decides
// the speed, so three things are spelled out (5-bit layer per core: 152 -> 166 GOPS, the 8-bit one unchanged):
// such a tile is compiled on its own (offset_tile_apart), not inlined into the block loop, where GCC spilled int16
// sums to the stack every step; the first step starts the sums; and empty asm statements pin the weight vectors and
// the sums to registers, so each weight is loaded once per step rather than once per row, and the sums stay in their
// registers across steps (without them: six vmovdqa copies per step, with them three). Fully unrolled, the compiler
// hoisted every product and spilled them.
template <int R, int N, int S>
void offset_tile(int K, const int8_t* a, int lda, const int8_t* b, int ldb, const int* cols, const int32_t* corr,
                 int32_t* y, int ldy) {
    const int8_t* wr[N];
    for (int n = 0; n < N; ++n) wr[n] = b + cols[n] * ldb;
    __m256i acc[R][N];
    for (int r = 0; r < R; ++r)
        for (int n = 0; n < N; ++n) acc[r][n] = _mm256_setzero_si256();
    const __m256i offset = _mm256_set1_epi8(char(0x80)), ones = _mm256_set1_epi16(1);
    auto xu = [&](int r, int k) {
        return _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + r * lda + k)), offset);
    };
    auto wv = [&](int n, int k) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wr[n] + k)); };
    int k = 0;
    for (; k + 32 * S <= K; k += 32 * S) {
        __m256i sum[R][N];
        for (int r = 0; r < R; ++r) {
            const __m256i x = xu(r, k);
            for (int n = 0; n < N; ++n) sum[r][n] = _mm256_maddubs_epi16(x, wv(n, k));
        }
#pragma GCC unroll 1
        for (int step = 1; step < S; ++step) {  // (see above: a loop, and the asm statements)
            __m256i w[N];
            for (int n = 0; n < N; ++n) {
                w[n] = wv(n, k + 32 * step);
                asm("" : "+x"(w[n]));  // in a register: not re-read as a memory operand by every row
            }
            for (int r = 0; r < R; ++r) {
                const __m256i x = xu(r, k + 32 * step);
                for (int n = 0; n < N; ++n) sum[r][n] = _mm256_add_epi16(sum[r][n], _mm256_maddubs_epi16(x, w[n]));
            }
            for (int r = 0; r < R; ++r)
                for (int n = 0; n < N; ++n) asm("" : "+x"(sum[r][n]));  // each sum stays in one register
        }
        for (int r = 0; r < R; ++r)
            for (int n = 0; n < N; ++n) acc[r][n] = _mm256_add_epi32(acc[r][n], _mm256_madd_epi16(sum[r][n], ones));
    }
    for (; k + 32 <= K; k += 32)  // the steps left over from the groups of S
        for (int r = 0; r < R; ++r) {
            const __m256i x = xu(r, k);
            for (int n = 0; n < N; ++n) acc[r][n] = dot(acc[r][n], x, wv(n, k));
        }
    for (int r = 0; r < R; ++r)
        for (int n = 0; n < N; ++n) {
            int32_t tail = 0;  // the offset form of dot_tail, in int32: any weight value is exact here
            for (int kk = k; kk < K; ++kk) tail += (int32_t(a[r * lda + kk]) + 128) * int32_t(wr[n][kk]);
            y[r * ldy + cols[n]] = hsum_epi32(acc[r][n]) + tail - corr[cols[n]];
        }
}

// S > 1 tiles compiled on their own (see offset_tile); S = 1 tiles stay inline, where they run ~4% faster.
template <int R, int N, int S>
__attribute__((noinline)) void offset_tile_apart(int K, const int8_t* a, int lda, const int8_t* b, int ldb,
                                                 const int* cols, const int32_t* corr, int32_t* y, int ldy) {
    offset_tile<R, N, S>(K, a, lda, b, ldb, cols, corr, y, ldy);
}

// The largest |w| among the weights of `row` that the offset tiles multiply with pmaddubsw (k < K / 32 * 32), as
// the form that row can take: 16, 32 or 64 (then *corr = 128 * sum_k row[k] over all K), or 0 (the sign form).
int offset_limit(int K, const int8_t* row, int32_t* corr) {
    const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
    __m256i mx = _mm256_setzero_si256(), sum = _mm256_setzero_si256();
    int k = 0;
    for (; k + 32 <= K; k += 32) {
        const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + k));
        mx = _mm256_max_epu8(mx, _mm256_abs_epi8(w));  // |-128| is 0x80: 128 as unsigned
        sum = _mm256_add_epi32(sum, _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, w), ones16));
    }
    int limit = 0;
    for (int candidate : {16, 32, 64}) {
        // any byte of mx above the candidate: max_epu8(mx, candidate) differs from it there
        const __m256i c = _mm256_set1_epi8(char(candidate));
        if (_mm256_testz_si256(_mm256_xor_si256(_mm256_max_epu8(mx, c), c), _mm256_set1_epi8(-1))) {
            limit = candidate;
            break;
        }
    }
    if (!limit) return 0;
    int32_t s = hsum_epi32(sum);
    for (; k < K; ++k) s += row[k];
    *corr = 128 * s;
    return limit;
}

// The channels cols[0..n) of a block for R rows in the offset form accumulating S steps in int16: tiles of 3
// channels, then single channels.
template <int R, int S>
void offset_rows(int n, const int* cols, int K, const int8_t* a, int lda, const int8_t* b, int ldb,
                 const int32_t* corr, int32_t* y, int ldy) {
    if constexpr (S > 1 && R > 2) {  // 2-row tiles: the int16 sums and the int32 accumulators fit the registers
        for (int r = 0; r < R; r += 2) offset_rows<2, S>(n, cols, K, a + r * lda, lda, b, ldb, corr, y + r * ldy, ldy);
        return;
    }
    constexpr auto tile3 = S > 1 ? offset_tile_apart<R, 3, S> : offset_tile<R, 3, S>;
    constexpr auto tile1 = S > 1 ? offset_tile_apart<R, 1, S> : offset_tile<R, 1, S>;
    int i = 0;
    for (; i + 3 <= n; i += 3) tile3(K, a, lda, b, ldb, cols + i, corr, y, ldy);
    for (; i < n; ++i) tile1(K, a, lda, b, ldb, cols + i, corr, y, ldy);
}

// Tiles of 2 channels share each activation load. A single row (decode) goes channel after channel instead: its
// weights come from memory, not L1, and one sequential stream is what the prefetcher follows at full bandwidth (the
// default model's linears at T = 1, 1 thread: 2-channel tiles 7.9 GB/s, single channels 20-22 GB/s).
template <int R>
void sign_rows(int n, const int* cols, int K, const int8_t* a, int lda, const int8_t* b, int ldb, int32_t* y,
               int ldy) {
    int i = 0;
    if constexpr (R > 1)
        for (; i + 2 <= n; i += 2) sign_tile<R, 2>(K, a, lda, b, ldb, cols + i, y, ldy);
    for (; i < n; ++i) sign_tile<R, 1>(K, a, lda, b, ldb, cols + i, y, ldy);
}

}  // namespace

// Per 16-channel block (its weight rows stay in L1 while every activation row streams past), its channels grouped by
// the offset form they can take (|w| <= 16, 32, 64) and the rest in the sign form. The scan costs about as much as
// multiplying one row, so small T (decode's T = 1) skips it: the offset form saves one instruction in four per row.
void gemm_s8_avx2(int T, int C, int K, const int8_t* a, int lda, const int8_t* b, int ldb, int32_t* y, int ldy) {
    constexpr int kCBlock = 16;
    constexpr int kNarrowMinRows = 8;
    int32_t corr[kCBlock];
    int n5[kCBlock], n6[kCBlock], n7[kCBlock], wide[kCBlock];  // channels with |w| <= 16, <= 32, <= 64, the rest
    for (int c0 = 0; c0 < C; c0 += kCBlock) {
        const int nc = C - c0 < kCBlock ? C - c0 : kCBlock;
        const int8_t* bb = b + c0 * ldb;
        int32_t* yb = y + c0;
        int i5 = 0, i6 = 0, i7 = 0, iw = 0;
        for (int n = 0; n < nc; ++n) {
            switch (T >= kNarrowMinRows ? offset_limit(K, bb + n * ldb, &corr[n]) : 0) {
                case 16: n5[i5++] = n; break;
                case 32: n6[i6++] = n; break;
                case 64: n7[i7++] = n; break;
                default: wide[iw++] = n;
            }
        }
        auto rows = [&](auto r_tag, int t) {
            constexpr int R = decltype(r_tag)::value;
            const int8_t* at = a + t * lda;
            int32_t* yt = yb + t * ldy;
            offset_rows<R, 4>(i5, n5, K, at, lda, bb, ldb, corr, yt, ldy);
            offset_rows<R, 2>(i6, n6, K, at, lda, bb, ldb, corr, yt, ldy);
            offset_rows<R, 1>(i7, n7, K, at, lda, bb, ldb, corr, yt, ldy);
            sign_rows<R>(iw, wide, K, at, lda, bb, ldb, yt, ldy);
        };
        int t = 0;
        for (; t + 4 <= T; t += 4) rows(std::integral_constant<int, 4>{}, t);
        for (; t < T; ++t) rows(std::integral_constant<int, 1>{}, t);
    }
}

}  // namespace edgeflow
