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
// instructions (pmaddubsw, pmaddwd, paddd) instead of four. Which channels qualify is read off the codes: every
// 16-channel block is scanned for max |w| (and its row sums) when the kernel runs - O(C * K) against O(T * C * K)
// multiply-adds - and takes the offset form only if all its weights fit; the answer is exact whatever bit width
// the file declared.
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

// One R x N tile of y: R activation rows against N weight rows. 4 x 2 keeps 8 accumulators, 2 weights, 2 |weights|
// and one activation vector in the 16 ymm registers.
struct Avx2Kernel {
    static constexpr int kN = 2;

    template <int R, int N>
    static void tile(int K, const int8_t* a, int lda, const int8_t* b, int ldb, int32_t* y, int ldy) {
        __m256i acc[R][N];
        for (int r = 0; r < R; ++r)
            for (int n = 0; n < N; ++n) acc[r][n] = _mm256_setzero_si256();
        int k = 0;
        for (; k + 32 <= K; k += 32) {
            __m256i w[N], aw[N];
            for (int n = 0; n < N; ++n) {
                w[n] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + n * ldb + k));
                aw[n] = _mm256_abs_epi8(w[n]);
            }
            for (int r = 0; r < R; ++r) {
                const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + r * lda + k));
                for (int n = 0; n < N; ++n) acc[r][n] = dot(acc[r][n], aw[n], _mm256_sign_epi8(x, w[n]));
            }
        }
        for (int r = 0; r < R; ++r)
            for (int n = 0; n < N; ++n)
                y[r * ldy + n] = hsum_epi32(acc[r][n]) + dot_tail(a + r * lda, b + n * ldb, k, K);
    }
};


// The offset form for narrow weights (|w| <= 64): one R x N tile of sum_k (x + 128) w - corr[n], corr[n] =
// 128 * sum_k w of channel n. 4 x 3 keeps 12 accumulators, 3 weight vectors and the offset activation vector in
// registers (the constants come from memory operands).
template <int R, int N>
void narrow_tile(int K, const int8_t* a, int lda, const int8_t* b, int ldb, const int32_t* corr, int32_t* y,
                 int ldy) {
    __m256i acc[R][N];
    for (int r = 0; r < R; ++r)
        for (int n = 0; n < N; ++n) acc[r][n] = _mm256_setzero_si256();
    const __m256i offset = _mm256_set1_epi8(char(0x80));
    int k = 0;
    for (; k + 32 <= K; k += 32) {
        __m256i w[N];
        for (int n = 0; n < N; ++n) w[n] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + n * ldb + k));
        for (int r = 0; r < R; ++r) {
            const __m256i xu =
                _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + r * lda + k)), offset);
            for (int n = 0; n < N; ++n) acc[r][n] = dot(acc[r][n], xu, w[n]);
        }
    }
    for (int r = 0; r < R; ++r)
        for (int n = 0; n < N; ++n) {
            int32_t tail = 0;  // the offset form of dot_tail
            for (int kk = k; kk < K; ++kk) tail += (int32_t(a[r * lda + kk]) + 128) * int32_t(b[n * ldb + kk]);
            y[r * ldy + n] = hsum_epi32(acc[r][n]) + tail - corr[n];
        }
}

template <int R>
void narrow_rows(int C, int K, const int8_t* a, int lda, const int8_t* b, int ldb, const int32_t* corr, int32_t* y,
                 int ldy) {
    int c = 0;
    for (; c + 3 <= C; c += 3) narrow_tile<R, 3>(K, a, lda, b + c * ldb, ldb, corr + c, y + c, ldy);
    for (; c < C; ++c) narrow_tile<R, 1>(K, a, lda, b + c * ldb, ldb, corr + c, y + c, ldy);
}

// True if every weight of the nc rows b[0..nc) that narrow_tile multiplies with pmaddubsw (k < K / 32 * 32) has
// |w| <= 64; then corr[n] = 128 * sum_k w[n][k] over all K. Stops at the first row that does not fit.
bool narrow_block(int nc, int K, const int8_t* b, int ldb, int32_t* corr) {
    const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1), limit = _mm256_set1_epi8(64);
    for (int n = 0; n < nc; ++n) {
        const int8_t* row = b + n * ldb;
        __m256i mx = _mm256_setzero_si256(), sum = _mm256_setzero_si256();
        int k = 0;
        for (; k + 32 <= K; k += 32) {
            const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + k));
            mx = _mm256_max_epu8(mx, _mm256_abs_epi8(w));  // |-128| is 0x80: 128 as unsigned
            sum = _mm256_add_epi32(sum, _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, w), ones16));
        }
        // any byte of mx above 64: max_epu8(mx, 64) differs from 64 there
        if (!_mm256_testz_si256(_mm256_xor_si256(_mm256_max_epu8(mx, limit), limit), _mm256_set1_epi8(-1)))
            return false;
        int32_t s = hsum_epi32(sum);
        for (; k < K; ++k) s += row[k];  // the K % 32 tail is multiplied in int32 (narrow_tile): any value is exact
        corr[n] = 128 * s;
    }
    return true;
}

}  // namespace

// Per 16-channel block (its weight rows stay in L1 while every activation row streams past): the offset form if
// the block's weights are narrow, else the sign form. The scan costs about as much as multiplying one row, so
// small T (decode's T = 1) skips it: the form saves one instruction in four per row.
void gemm_s8_avx2(int T, int C, int K, const int8_t* a, int lda, const int8_t* b, int ldb, int32_t* y, int ldy) {
    constexpr int kCBlock = 16;
    constexpr int kNarrowMinRows = 8;
    int32_t corr[kCBlock];
    for (int c0 = 0; c0 < C; c0 += kCBlock) {
        const int nc = C - c0 < kCBlock ? C - c0 : kCBlock;
        const int8_t* bb = b + c0 * ldb;
        int32_t* yb = y + c0;
        int t = 0;
        if (T >= kNarrowMinRows && narrow_block(nc, K, bb, ldb, corr)) {
            for (; t + 4 <= T; t += 4) narrow_rows<4>(nc, K, a + t * lda, lda, bb, ldb, corr, yb + t * ldy, ldy);
            for (; t < T; ++t) narrow_rows<1>(nc, K, a + t * lda, lda, bb, ldb, corr, yb + t * ldy, ldy);
        } else {
            for (; t + 4 <= T; t += 4) gemm_row_block<Avx2Kernel, 4>(nc, K, a + t * lda, lda, bb, ldb, yb + t * ldy, ldy);
            for (; t < T; ++t) gemm_row_block<Avx2Kernel, 1>(nc, K, a + t * lda, lda, bb, ldb, yb + t * ldy, ldy);
        }
    }
}

}  // namespace edgeflow
