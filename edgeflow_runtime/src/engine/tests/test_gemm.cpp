// Every INT8 GEMM kernel this CPU runs must equal the scalar reference bit for bit, on shapes with row, channel
// and K tails and on the extreme values that would saturate a careless pmaddubsw pairing.
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "check.h"  // edgeflow_runtime/tests/check.h
#include "gemm.h"

using namespace edgeflow;

static void compare_all(int T, int C, int K, const std::vector<int8_t>& a, const std::vector<int8_t>& b,
                        const char* what) {
    std::vector<int32_t> want(size_t(T) * C), got(size_t(T) * C);
    gemm_s8_ref(T, C, K, a.data(), K, b.data(), K, want.data(), C);
    for (const auto& k : available_gemm_kernels()) {
        std::fill(got.begin(), got.end(), 0x5a5a5a5a);
        k.fn(T, C, K, a.data(), K, b.data(), K, got.data(), C);
        const bool same = std::memcmp(want.data(), got.data(), want.size() * sizeof(int32_t)) == 0;
        if (!same) std::fprintf(stderr, "kernel %s differs from ref: %s T=%d C=%d K=%d\n", k.name, what, T, C, K);
        CHECK(same);
    }
}

int main() {
    std::mt19937 rng(1234);
    std::uniform_int_distribution<int> act(-127, 127), wt(-128, 127);
    const int shapes[][3] = {{1, 1, 1},   {1, 16, 32},  {4, 2, 64},    {5, 17, 33},  {7, 33, 95},
                             {9, 48, 576}, {13, 40, 100}, {3, 5, 1536}, {16, 64, 160}, {2, 3, 17}};
    for (const auto& s : shapes) {
        const int T = s[0], C = s[1], K = s[2];
        std::vector<int8_t> a(size_t(T) * K), b(size_t(C) * K);
        for (auto& x : a) x = int8_t(act(rng));
        for (auto& x : b) x = int8_t(wt(rng));
        compare_all(T, C, K, a, b, "random");
        // Extremes: |a| = 127 against w = -128 in every sign combination (the largest pair sums).
        for (int sa : {127, -127})
            for (int sb : {-128, 127}) {
                std::fill(a.begin(), a.end(), int8_t(sa));
                std::fill(b.begin(), b.end(), int8_t(sb));
                compare_all(T, C, K, a, b, "extreme");
            }
    }
    // Strided operands (lda, ldb > K; ldy > C), as the matmul splits channels into blocks.
    {
        const int T = 6, C = 20, K = 64, lda = 80, ldb = 70, ldy = 31;
        std::vector<int8_t> a(size_t(T) * lda), b(size_t(C) * ldb);
        for (auto& x : a) x = int8_t(act(rng));
        for (auto& x : b) x = int8_t(wt(rng));
        std::vector<int32_t> want(size_t(T) * ldy, -1), got(size_t(T) * ldy, -1);
        gemm_s8_ref(T, C, K, a.data(), lda, b.data(), ldb, want.data(), ldy);
        for (const auto& k : available_gemm_kernels()) {
            std::fill(got.begin(), got.end(), -1);
            k.fn(T, C, K, a.data(), lda, b.data(), ldb, got.data(), ldy);
            CHECK(want == got);
        }
    }
    std::printf("kernels:");
    for (const auto& k : available_gemm_kernels()) std::printf(" %s", k.name);
    std::printf("; best: %s\n", best_gemm_kernel().name);
    if (g_failures) std::fprintf(stderr, "%d check(s) failed\n", g_failures);
    return g_failures ? 1 : 0;
}
