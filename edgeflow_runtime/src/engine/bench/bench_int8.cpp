// INT8 throughput of this machine and of our GEMM, for `make bench-runtime`.
//
//   edgeflow-bench-int8 [threads] [seconds]
//
// GOPS count a multiply-add as 2 operations; every thread runs the same loop.
//   instruction_gops: each INT8 multiply instruction alone, 8-12 independent copies per loop iteration written in
//     assembly so the compiler cannot fold them: x86 pmaddubsw (32 u8 x s8 multiply-adds), AVX-VNNI vpdpbusd (32,
//     accumulating into int32); aarch64 sdot (16). int8_peak_gops is the best of them: the machine's INT8 peak.
//   step_gops: the AVX2 kernel's exact signed x signed -> int32 step psignb + pmaddubsw + pmaddwd + paddd per 32
//     multiply-adds, in independent accumulator chains: the ceiling of an AVX2-only INT8 engine. (The AVX-VNNI
//     kernel needs one vpdpbusd per 32 multiply-adds, so its ceiling is the instruction's.)
//   gemm_gops: our best kernel on the default model's prefill matmuls (T = 128 tokens), split over the threads as
//     the accelerator emulator does. Output: one JSON object.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

#include "gemm.h"
#include "thread_pool.h"

using namespace edgeflow;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kChains = 12;  // independent accumulators: more than latency x throughput of the longest step

#if defined(__x86_64__)
enum class Op { Maddubs, Vpdpbusd, Avx2Step };

#define EF_REPEAT8(x) x x x x x x x x

// Each chain feeds its own result back in, so no two chains compute the same thing and nothing folds away.
__attribute__((target("avx2,avxvnni"))) double chain_ops(long iters, Op op) {
    __m256i acc[kChains];
    __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(-2);
    const __m256i ones = _mm256_set1_epi16(1);
    for (int i = 0; i < kChains; ++i) acc[i] = _mm256_set1_epi32(i);
    if (op == Op::Maddubs) {
        for (long it = 0; it < iters; ++it)
            __asm__ volatile(EF_REPEAT8("vpmaddubsw %%ymm14, %%ymm15, %%ymm0\n vpmaddubsw %%ymm14, %%ymm15, %%ymm1\n")
                             ::: "xmm0", "xmm1");
        return double(iters) * 16 * 32 * 2;
    }
    if (op == Op::Vpdpbusd) {
        for (long it = 0; it < iters; ++it)
            __asm__ volatile(EF_REPEAT8("%{vex%} vpdpbusd %%ymm14, %%ymm15, %%ymm0\n %{vex%} vpdpbusd %%ymm14, %%ymm15, %%ymm1\n"
                                        "%{vex%} vpdpbusd %%ymm14, %%ymm15, %%ymm2\n %{vex%} vpdpbusd %%ymm14, %%ymm15, %%ymm3\n"
                                        "%{vex%} vpdpbusd %%ymm14, %%ymm15, %%ymm4\n %{vex%} vpdpbusd %%ymm14, %%ymm15, %%ymm5\n"
                                        "%{vex%} vpdpbusd %%ymm14, %%ymm15, %%ymm6\n %{vex%} vpdpbusd %%ymm14, %%ymm15, %%ymm7\n")
                             ::: "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7");
        return double(iters) * 64 * 32 * 2;
    }
    for (long it = 0; it < iters; ++it) {
        for (int i = 0; i < kChains; ++i) {
            const __m256i p = _mm256_maddubs_epi16(a, _mm256_sign_epi8(b, acc[i]));
            acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(p, ones));
        }
        __asm__ volatile("" : "+x"(a), "+x"(b));
    }
    int sink = 0;
    for (int i = 0; i < kChains; ++i) sink += _mm256_extract_epi32(acc[i], 0);
    static std::atomic<int> g;
    g += sink;
    return double(iters) * kChains * 32 * 2;
}
#elif defined(__aarch64__)
enum class Op { Sdot };

__attribute__((target("arch=armv8.2-a+dotprod"))) double chain_ops(long iters, Op) {
    int32x4_t acc[kChains];
    const int8x16_t b = vdupq_n_s8(-2);
    for (int i = 0; i < kChains; ++i) acc[i] = vdupq_n_s32(i);
    for (long it = 0; it < iters; ++it)
        for (int i = 0; i < kChains; ++i) acc[i] = vdotq_s32(acc[i], vreinterpretq_s8_s32(acc[i]), b);
    int sink = 0;
    for (int i = 0; i < kChains; ++i) sink += vgetq_lane_s32(acc[i], 0);
    static std::atomic<int> g;
    g += sink;
    return double(iters) * kChains * 16 * 2;
}
#endif

// GOPS of chain_ops on `threads` threads running together for about `seconds`.
double measure_chains(int threads, double seconds, Op op) {
    long iters = 1 << 16;
    for (;;) {  // calibrate on one thread
        const auto t0 = Clock::now();
        chain_ops(iters, op);
        const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
        if (dt > 0.02) {
            iters = long(iters * seconds / dt) + 1;
            break;
        }
        iters *= 4;
    }
    std::vector<std::thread> ts;
    std::vector<double> ops(threads);
    const auto t0 = Clock::now();
    for (int i = 0; i < threads; ++i) ts.emplace_back([&, i] { ops[i] = chain_ops(iters, op); });
    for (auto& t : ts) t.join();
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    double total = 0;
    for (double o : ops) total += o;
    return total / dt / 1e9;
}

// GOPS of the best kernel over the default model's prefill matmuls (one layer), median of several runs.
double measure_gemm(int threads, double seconds) {
    const int T = 128, H = 576, I = 1536, KV = 192;
    const int shapes[][2] = {{H, H}, {KV, H}, {KV, H}, {H, H}, {I, H}, {I, H}, {H, I}};  // [C, K]
    std::vector<int8_t> a(size_t(T) * I, 7);
    std::vector<std::vector<int8_t>> w;
    for (const auto& s : shapes) w.emplace_back(size_t(s[0]) * s[1], int8_t(-3));
    std::vector<int32_t> y(size_t(T) * I);
    ThreadPool pool(threads);
    const GemmFn fn = best_gemm_kernel().fn;
    double ops_per_layer = 0;
    for (const auto& s : shapes) ops_per_layer += 2.0 * T * s[0] * s[1];
    auto layer = [&] {
        for (size_t i = 0; i < w.size(); ++i) {
            const int C = shapes[i][0], K = shapes[i][1];
            const int n = 4 * threads, per = ((C + n - 1) / n + 15) / 16 * 16;
            pool.parallel_for((C + per - 1) / per, [&](int j) {
                const int c0 = j * per, c1 = std::min(C, c0 + per);
                fn(T, c1 - c0, K, a.data(), K, w[i].data() + size_t(c0) * K, K, y.data() + c0, C);
            });
        }
    };
    layer();
    std::vector<double> rates;
    const auto start = Clock::now();
    while (rates.size() < 5 || std::chrono::duration<double>(Clock::now() - start).count() < seconds) {
        const auto t0 = Clock::now();
        layer();
        rates.push_back(ops_per_layer / std::chrono::duration<double>(Clock::now() - t0).count() / 1e9);
        if (rates.size() > 1000) break;
    }
    std::sort(rates.begin(), rates.end());
    return rates[rates.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
    const double seconds = argc > 2 ? std::atof(argv[2]) : 0.5;
    if (threads < 1 || seconds <= 0) {
        std::fprintf(stderr, "usage: edgeflow-bench-int8 [threads >= 1] [seconds > 0]\n");
        return 2;
    }
    std::string instrs, steps;
    double peak = 0;
    auto measure = [&](std::string& out, const char* name, Op op, bool is_peak) {
        const double g = measure_chains(threads, seconds, op);
        out += std::string(out.empty() ? "" : ", ") + "\"" + name + "\": " + std::to_string(g);
        if (is_peak) peak = std::max(peak, g);
    };
#if defined(__x86_64__)
    if (!__builtin_cpu_supports("avx2")) {
        std::fprintf(stderr, "edgeflow-bench-int8: this CPU has no AVX2; no INT8 peak to measure\n");
        return 3;
    }
    measure(instrs, "pmaddubsw", Op::Maddubs, true);
    measure(steps, "avx2", Op::Avx2Step, false);
    if (__builtin_cpu_supports("avxvnni")) measure(instrs, "vpdpbusd", Op::Vpdpbusd, true);
#else
    bool sdot = false;
    for (const auto& k : available_gemm_kernels()) sdot |= std::string(k.name) == "neon-sdot";
    if (!sdot) {
        std::fprintf(stderr, "edgeflow-bench-int8: this CPU has no sdot; no INT8 peak to measure\n");
        return 3;
    }
    measure(instrs, "sdot", Op::Sdot, true);
#endif
    const double gemm = measure_gemm(threads, seconds);
    std::printf("{\"threads\": %d, \"instruction_gops\": {%s}, \"step_gops\": {%s}, \"int8_peak_gops\": %.2f, "
                "\"gemm_kernel\": \"%s\", \"gemm_gops\": %.2f, \"gemm_efficiency\": %.3f}\n",
                threads, instrs.c_str(), steps.c_str(), peak, best_gemm_kernel().name, gemm, gemm / peak);
    return 0;
}
