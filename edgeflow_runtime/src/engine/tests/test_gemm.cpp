// Every INT8 GEMM kernel this CPU runs must equal the scalar reference bit for bit: on shapes with row, channel
// and K tails of every size the kernels block by (rows in 1..8, AMX's 16-row tiles and 32-row blocks; channel groups
// of 1..16, 16-channel tiles of 1..3, AMX's 32-channel blocks; K % 4, % 16, % 32, % 64), with tight and with padded
// strides (lda > K, ldb > K, ldy > C: y's padding must stay
// untouched), on the extreme values that would saturate a careless pmaddubsw pairing or offset, on weights of every
// stored bit width 2..8 (kernels may switch to a cheaper form when a block's codes are narrow, |w| <= 64 at <= 7
// bits, <= 32 at 6, <= 16 at 5: whole blocks narrow, blocks mixing widths, one wide code among narrow ones, the
// boundaries |w| = 16/17, 32/33 and 64/65),
// and from several threads at once (kernels may keep per-thread scratch).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "check.h"  // edgeflow_runtime/tests/check.h
#include "gemm.h"

using namespace edgeflow;

namespace {

constexpr int32_t kSentinel = 0x5a5a5a5a;

struct Case {
    int T, C, K, lda, ldb, ldy;
    std::vector<int8_t> a, b;  // [T, lda], [C, ldb]; the padding past K holds random bytes the kernels must ignore
};

enum class Fill { Random, Extreme, ExtremeMix };

Case make_case(std::mt19937& rng, int T, int C, int K, bool padded, Fill fill, int sa = 127, int sb = -128) {
    std::uniform_int_distribution<int> act(-127, 127), wt(-128, 127), pad(1, 13), coin(0, 1);
    Case c{T, C, K, K, K, C, {}, {}};
    if (padded) {
        c.lda = K + pad(rng);
        c.ldb = K + pad(rng);
        c.ldy = C + pad(rng);
    }
    c.a.resize(size_t(T) * c.lda);
    c.b.resize(size_t(C) * c.ldb);
    for (auto& x : c.a) x = int8_t(wt(rng));  // padding bytes: anything, -128 included
    for (auto& x : c.b) x = int8_t(wt(rng));
    for (int t = 0; t < T; ++t)
        for (int k = 0; k < K; ++k) {
            int8_t& x = c.a[size_t(t) * c.lda + k];
            x = int8_t(fill == Fill::Random ? act(rng) : fill == Fill::Extreme ? sa : (coin(rng) ? 127 : -127));
        }
    for (int n = 0; n < C; ++n)
        for (int k = 0; k < K; ++k) {
            int8_t& x = c.b[size_t(n) * c.ldb + k];
            x = int8_t(fill == Fill::Random ? wt(rng) : fill == Fill::Extreme ? sb : (coin(rng) ? 127 : -128));
        }
    return c;
}

int g_compared = 0;

void compare_all(const Case& c, const char* what) {
    std::vector<int32_t> want(size_t(c.T) * c.ldy, kSentinel), got(want.size());
    gemm_s8_ref(c.T, c.C, c.K, c.a.data(), c.lda, c.b.data(), c.ldb, want.data(), c.ldy);
    for (const auto& k : available_gemm_kernels()) {
        std::fill(got.begin(), got.end(), kSentinel);
        k.fn(c.T, c.C, c.K, c.a.data(), c.lda, c.b.data(), c.ldb, got.data(), c.ldy);
        const bool same = want == got;  // the padding columns of y included: still the sentinel
        if (!same) {
            size_t i = 0;
            while (want[i] == got[i]) ++i;
            std::fprintf(stderr, "kernel %s differs from ref: %s T=%d C=%d K=%d lda=%d ldb=%d ldy=%d, first at t=%zu "
                         "c=%zu: %d vs %d\n", k.name, what, c.T, c.C, c.K, c.lda, c.ldb, c.ldy, i / c.ldy,
                         i % c.ldy, got[i], want[i]);
        }
        CHECK(same);
        ++g_compared;
    }
}

// The accelerator's way of calling a kernel: channel blocks of one matmul on several threads at once, each writing
// its own columns of y.
void compare_threads(std::mt19937& rng, int T, int C, int K, int threads) {
    const Case c = make_case(rng, T, C, K, false, Fill::Random);
    std::vector<int32_t> want(size_t(T) * C);
    gemm_s8_ref(T, C, K, c.a.data(), K, c.b.data(), K, want.data(), C);
    for (const auto& k : available_gemm_kernels()) {
        std::vector<int32_t> got(want.size(), kSentinel);
        const int per = (C + threads - 1) / threads;
        std::vector<std::thread> ts;
        for (int i = 0; i < threads; ++i)
            ts.emplace_back([&, i] {
                for (int rep = 0; rep < 3; ++rep) {  // repeated: scratch reuse across calls
                    const int c0 = i * per, c1 = std::min(C, c0 + per);
                    if (c0 < c1) k.fn(T, c1 - c0, K, c.a.data(), K, c.b.data() + size_t(c0) * K, K, got.data() + c0, C);
                }
            });
        for (auto& t : ts) t.join();
        if (want != got) std::fprintf(stderr, "kernel %s differs from ref on %d threads T=%d C=%d K=%d\n", k.name,
                                      threads, T, C, K);
        CHECK(want == got);
    }
}

}  // namespace

int main() {
    std::mt19937 rng(1234);
    // Every row count up to two full row tiles and beyond, against channel counts around the 16-lane groups and
    // 3-group tiles, at K with every tail class; tight and padded strides.
    const int Ts[] = {1, 2, 3, 4, 5, 7, 8, 9, 12, 15, 16, 17, 23, 31, 32, 33, 48};
    const int Cs[] = {1, 2, 5, 15, 16, 17, 31, 32, 33, 47, 48, 49, 63, 64, 65, 80, 97};
    const int Ks[] = {1, 3, 4, 17, 64, 101};
    for (int T : Ts)
        for (int C : Cs)
            for (int K : Ks) compare_all(make_case(rng, T, C, K, (T + C + K) % 2 == 1, Fill::Random), "random");
    // More K tails (every K % 64 class near the vector widths), fewer T x C.
    for (int K = 1; K <= 140; ++K) {
        compare_all(make_case(rng, 9, 19, K, false, Fill::Random), "random K sweep");
        compare_all(make_case(rng, 3, 35, K, true, Fill::Random), "random K sweep, padded");
    }
    // The default model's shapes and neighbours: K = 576 and 1536, a prefill chunk and a Forward::matmul block.
    const int big[][3] = {{128, 80, 576}, {128, 48, 1536}, {130, 35, 579}, {33, 49, 1537}, {16, 64, 160},
                          {9, 48, 576},   {3, 5, 1536},    {1, 192, 576}, {1, 100, 1536}};
    for (const auto& s : big) {
        compare_all(make_case(rng, s[0], s[1], s[2], false, Fill::Random), "random model shape");
        compare_all(make_case(rng, s[0], s[1], s[2], true, Fill::Random), "random model shape, padded");
    }
    // Extremes: |a| = 127 against w = -128 or 127 in every sign combination (the largest pair sums, and offsets
    // x + 128 / w + 128 at 255 and 0), and a random mix of the extremes.
    const int ext[][3] = {{1, 1, 1},  {4, 2, 64},    {5, 17, 33},  {7, 33, 95},   {9, 48, 576},
                          {13, 40, 100}, {3, 5, 1536}, {17, 50, 1537}, {128, 32, 1536}, {2, 3, 17}};
    for (const auto& s : ext) {
        for (int sa : {127, -127})
            for (int sb : {-128, 127}) {
                compare_all(make_case(rng, s[0], s[1], s[2], false, Fill::Extreme, sa, sb), "extreme");
                compare_all(make_case(rng, s[0], s[1], s[2], true, Fill::Extreme, sa, sb), "extreme, padded");
            }
        compare_all(make_case(rng, s[0], s[1], s[2], true, Fill::ExtremeMix), "extreme mix");
    }
    // Bit widths: channel n holds codes of width(n) bits, symmetric [-2^(b-1), 2^(b-1) - 1], plus +2^(b-1) (the
    // magnitude a <= 7-bit code may reach, 64 at 7 bits).
    auto widths = [&](int T, int C, int K, bool padded, auto width, const char* what) {
        Case c = make_case(rng, T, C, K, padded, Fill::Random);
        for (int n = 0; n < C; ++n) {
            const int h = 1 << (width(n) - 1);
            std::uniform_int_distribution<int> code(-h, h);
            for (int k = 0; k < K; ++k) c.b[size_t(n) * c.ldb + k] = int8_t(std::min(code(rng), 127));
        }
        compare_all(c, what);
        return c;
    };
    const int wshapes[][3] = {{9, 48, 576}, {17, 33, 100}, {4, 16, 1536}, {130, 40, 67}, {1, 35, 576}};
    for (const auto& s : wshapes) {
        for (int bits = 2; bits <= 8; ++bits) {
            widths(s[0], s[1], s[2], false, [&](int) { return bits; }, "one width");
            widths(s[0], s[1], s[2], true, [&](int) { return bits; }, "one width, padded");
        }
        widths(s[0], s[1], s[2], false, [](int n) { return 2 + n % 7; }, "widths mixed per channel");
        widths(s[0], s[1], s[2], true, [](int n) { return (n / 16) % 2 ? 8 : 7; }, "widths per 16-channel block");
        // Narrow codes with one wide one (65 or -65, then -128) somewhere: the block must take the exact form.
        for (int wide : {65, -65, -128}) {
            Case c = widths(s[0], s[1], s[2], false, [](int) { return 7; }, "7 bits");
            c.b[size_t(s[1] / 2) * c.ldb + size_t(s[2] - 1)] = int8_t(wide);
            compare_all(c, "7 bits and one wide code");
            c.b[size_t(s[1] - 1) * c.ldb + 0] = int8_t(wide);
            compare_all(c, "7 bits and two wide codes");
        }
        // The boundaries of the offset forms: every w = +-16 (four steps summed in int16), +-17 and +-32 (two
        // steps), +-33 and +-64 (one step) or +-65 (the sign form: (127 + 128) * 65 * 2 would saturate an int16
        // pair) against every x = +-127.
        for (int sa : {127, -127})
            for (int sb : {16, -16, 17, -17, 32, -32, 33, -33, 64, -64, 65, -65}) {
                compare_all(make_case(rng, s[0], s[1], s[2], false, Fill::Extreme, sa, sb), "extreme 7-bit");
                compare_all(make_case(rng, s[0], s[1], s[2], true, Fill::Extreme, sa, sb), "extreme 7-bit, padded");
            }
    }
    compare_threads(rng, 128, 576, 576, 4);
    compare_threads(rng, 21, 150, 200, 3);
    std::printf("%d kernel comparisons; kernels:", g_compared);
    for (const auto& k : available_gemm_kernels()) std::printf(" %s", k.name);
    std::printf("; best: %s\n", best_gemm_kernel().name);
    if (g_failures) std::fprintf(stderr, "%d check(s) failed\n", g_failures);
    return g_failures ? 1 : 0;
}
