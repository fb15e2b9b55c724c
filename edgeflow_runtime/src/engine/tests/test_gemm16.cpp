// Every A16 x INT8 kernel this CPU runs must equal the scalar reference bit for bit (gemm16.h): on row and channel
// tails of the 2 x 4 tiles, K tails of the vector steps (8, 16, 32) and K past kA16KBlock (the int32 blocks), tight and
// padded strides (y's padding must stay untouched), the extremes +-32767 x -128 / 127 whose sums pass int32 at the
// model's K, and from several threads at once. The reference itself is checked against sums computed by hand.
// The requantization epilogue (ops.h requantize_rows) is checked here too: half to even, clamped to the width.
#include <algorithm>
#include <cstdio>
#include <random>
#include <thread>
#include <vector>

#include "check.h"  // edgeflow_runtime/tests/check.h
#include "gemm16.h"
#include "ops.h"

using namespace edgeflow;

namespace {

constexpr int64_t kSentinel = 0x5a5a5a5a5a5aLL;

struct Case {
    int T, C, K, lda, ldb, ldy;
    std::vector<int16_t> a;  // [T, lda]
    std::vector<int8_t> b;   // [C, ldb]
};

enum class Fill { Random, Extreme };

Case make_case(std::mt19937& rng, int T, int C, int K, bool padded, Fill fill, int sa = 32767, int sb = -128) {
    std::uniform_int_distribution<int> act(-32767, 32767), wt(-128, 127), pad(1, 13), junk(-32768, 32767);
    Case c{T, C, K, K, K, C, {}, {}};
    if (padded) c.lda = K + pad(rng), c.ldb = K + pad(rng), c.ldy = C + pad(rng);
    c.a.resize(size_t(T) * c.lda);
    c.b.resize(size_t(C) * c.ldb);
    for (auto& x : c.a) x = int16_t(junk(rng));  // padding: anything the kernels must ignore
    for (auto& x : c.b) x = int8_t(wt(rng));
    for (int t = 0; t < T; ++t)
        for (int k = 0; k < K; ++k) c.a[size_t(t) * c.lda + k] = int16_t(fill == Fill::Random ? act(rng) : sa);
    for (int n = 0; n < C; ++n)
        for (int k = 0; k < K; ++k) c.b[size_t(n) * c.ldb + k] = int8_t(fill == Fill::Random ? wt(rng) : sb);
    return c;
}

void compare_all(const Case& c, const char* what) {
    std::vector<int64_t> want(size_t(c.T) * c.ldy, kSentinel), got(want.size());
    gemm_s16_ref(c.T, c.C, c.K, c.a.data(), c.lda, c.b.data(), c.ldb, want.data(), c.ldy);
    for (const auto& k : available_gemm16_kernels()) {
        std::fill(got.begin(), got.end(), kSentinel);
        k.fn(c.T, c.C, c.K, c.a.data(), c.lda, c.b.data(), c.ldb, got.data(), c.ldy);
        if (want != got) {
            size_t i = 0;
            while (want[i] == got[i]) ++i;
            std::fprintf(stderr, "A16 kernel %s differs from ref: %s T=%d C=%d K=%d lda=%d ldb=%d ldy=%d, first at "
                         "t=%zu c=%zu: %lld vs %lld\n", k.name, what, c.T, c.C, c.K, c.lda, c.ldb, c.ldy, i / c.ldy,
                         i % c.ldy, (long long)got[i], (long long)want[i]);
        }
        CHECK(want == got);
    }
}

void compare_threads(std::mt19937& rng, int T, int C, int K, int threads) {
    const Case c = make_case(rng, T, C, K, false, Fill::Random);
    std::vector<int64_t> want(size_t(T) * C);
    gemm_s16_ref(T, C, K, c.a.data(), K, c.b.data(), K, want.data(), C);
    for (const auto& k : available_gemm16_kernels()) {
        std::vector<int64_t> got(want.size(), kSentinel);
        const int per = (C + threads - 1) / threads;
        std::vector<std::thread> ts;
        for (int i = 0; i < threads; ++i)
            ts.emplace_back([&, i] {
                const int c0 = i * per, c1 = std::min(C, c0 + per);
                if (c0 < c1) k.fn(T, c1 - c0, K, c.a.data(), K, c.b.data() + size_t(c0) * K, K, got.data() + c0, C);
            });
        for (auto& t : ts) t.join();
        CHECK(want == got);
    }
}

void check_reference() {
    // 3 inputs: 32767 * -128 * 3 = -12582528; and one row of the default model's K at the extremes: past int32
    const int16_t a[3] = {32767, 32767, 32767};
    const int8_t b[3] = {-128, -128, -128};
    int64_t y = 0;
    gemm_s16_ref(1, 1, 3, a, 3, b, 3, &y, 1);
    CHECK(y == -12582528);
    std::vector<int16_t> wide(1536, -32767);
    std::vector<int8_t> w(1536, -128);
    gemm_s16_ref(1, 1, 1536, wide.data(), 1536, w.data(), 1536, &y, 1);
    CHECK(y == int64_t(32767) * 128 * 1536);  // 6442254336 > 2^31
}

void check_requantize() {
    // ratio 0.5: sums 1, 3, 5 land on ties 0.5, 1.5, 2.5 -> 0, 2, 2 (half to even); -3 -> -2 (-1.5 to even)
    const int64_t acc[6] = {1, 3, 5, -3, 1000, -1000};
    const double ratio[6] = {0.5, 0.5, 0.5, 0.5, 0.5, 0.5};
    int32_t y[6];
    requantize_rows(1, 6, acc, 6, ratio, 127, y, 6);
    const int32_t want[6] = {0, 2, 2, -2, 127, -128};  // 500 and -500 clamp to the 8-bit codes
    CHECK(std::equal(y, y + 6, want));
    requantize_rows(1, 6, acc, 6, ratio, 32767, y, 6);
    const int32_t want16[6] = {0, 2, 2, -2, 500, -500};
    CHECK(std::equal(y, y + 6, want16));
    int32_t in_place[2] = {7, -7};  // int32 sums requantized where they lie (A8 linears)
    const double r2[2] = {1.0 / 14, 1.0 / 14};
    requantize_rows(1, 2, in_place, 2, r2, 127, in_place, 2);
    CHECK(in_place[0] == 0 && in_place[1] == 0);  // 0.5 and -0.5 to even
}

}  // namespace

int main() {
    check_reference();
    check_requantize();
    std::mt19937 rng(4321);
    const int Ts[] = {1, 2, 3, 4, 5, 8, 17};
    const int Cs[] = {1, 2, 3, 4, 5, 7, 8, 9, 16, 33};
    const int Ks[] = {1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 65, 100};
    for (int T : Ts)
        for (int C : Cs)
            for (int K : Ks) compare_all(make_case(rng, T, C, K, (T + C + K) % 2 == 1, Fill::Random), "random");
    // K across the int32 blocks (1024; 256 in the packed AVX-512 path) and the default model's shapes
    const int big[][3] = {{3, 5, 1023}, {3, 5, 1024}, {3, 5, 1025}, {2, 4, 2049}, {128, 48, 576}, {9, 36, 1536},
                          {1, 64, 1536}, {5, 9, 1537},
                          {8, 17, 1537}, {17, 50, 300}};  // (T >= 8: the AVX-512 kernel's packed path)
    for (const auto& s : big) {
        compare_all(make_case(rng, s[0], s[1], s[2], false, Fill::Random), "random, wide K");
        compare_all(make_case(rng, s[0], s[1], s[2], true, Fill::Random), "random, wide K, padded");
        for (int sa : {32767, -32767})
            for (int sb : {-128, 127}) compare_all(make_case(rng, s[0], s[1], s[2], true, Fill::Extreme, sa, sb),
                                                   "extreme");
    }
    compare_threads(rng, 16, 96, 1536, 4);
    std::printf("test_gemm16: kernels:");
    for (const auto& k : available_gemm16_kernels()) std::printf(" %s", k.name);
    std::printf("; %d failures\n", g_failures);
    return g_failures == 0 ? 0 : 1;
}
