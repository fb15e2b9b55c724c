// INT8 throughput of this machine and of our GEMM, for `make bench-runtime`.
//
//   edgeflow-bench-int8 [threads] [seconds]
//
// GOPS count a multiply-add as 2 operations; every thread runs the same loop.
//   instruction_gops: each INT8 multiply instruction alone, 8-16 independent copies per loop iteration written in
//     assembly so the compiler cannot fold them: x86 pmaddubsw (ymm: 32 u8 x s8 multiply-adds), AVX-VNNI vpdpbusd
//     (ymm: 32, accumulating into int32), AVX-512 VNNI vpdpbusd_zmm (64), AMX tdpbssd (a 16 x 16 x 64 tile product:
//     16,384, where the amx kernel is available); aarch64 sdot (16). int8_peak_gops is the best of them: the machine's
//     INT8 peak.
//   step_gops: the AVX2 kernel's exact signed x signed -> int32 step psignb + pmaddubsw + pmaddwd + paddd per 32
//     multiply-adds, in independent accumulator chains: the ceiling of an AVX2-only INT8 engine. (The VNNI kernels
//     need one vpdpbusd per 32 or 64 multiply-adds, so their ceiling is the instruction's.)
//   gemm_gops: our best kernel on the default model's prefill matmuls (T = 128 tokens), split over the threads as
//     the accelerator emulator does; gemm_kernels: every SIMD kernel this CPU runs on the same matmuls, in total
//     ("layer") and split by K (576: q, k, v, o, gate, up; 1536: down), each as a fraction of the peak of the
//     instruction it is built on ("of_instruction"); "layer_gops_7bit", "_6bit", "_5bit": the layer again with
//     weight codes of 7, 6, 5 bits (|w| <= 64, 32, 16), and core_layer_gops_5bit per core. Random codes elsewhere
//     (8 bits).
//   a16_instruction_gops: the A16 kernels' multiply instructions the same way, pmaddwd (ymm: 16 int16 multiply-adds)
//     and AVX-512 VNNI vpdpwssd_zmm (32); gemm16_kernels: each A16 kernel on the same layer with int16 activations, as
//     a fraction of its instruction ("of_instruction"), and a16_of_int8: the best A16 kernel over the best INT8 one
//     (at most 0.5 on AVX-512 VNNI, where vpdpwssd does half of vpdpbusd's multiply-adds).
//   per core, robust to other processes on a shared machine: core_instruction_gops (each peak instruction on one
//     thread) and per kernel core_layer_gops / core_of_instruction (the layer's channel blocks one after another on
//     one thread), all per thread CPU second, best of several runs. Output: one JSON object.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <time.h>

#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

#include "amx_tiles.h"
#include "cpu_features.h"
#include "gemm.h"
#include "gemm16.h"
#include "thread_pool.h"

using namespace edgeflow;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kChains = 12;  // independent accumulators: more than latency x throughput of the longest step

#if defined(__x86_64__)
enum class Op { Maddubs, Vpdpbusd, VpdpbusdZmm, Tdpbssd, Avx2Step, Pmaddwd, VpdpwssdZmm };

#define EF_REPEAT8(x) x x x x x x x x
// 12 independent accumulators zmm16-27 of one instruction on zmm30, zmm31
#define EF_ZMM12(op)                                                                                            \
    op " %%zmm30, %%zmm31, %%zmm16\n " op " %%zmm30, %%zmm31, %%zmm17\n " op " %%zmm30, %%zmm31, %%zmm18\n "      \
    op " %%zmm30, %%zmm31, %%zmm19\n " op " %%zmm30, %%zmm31, %%zmm20\n " op " %%zmm30, %%zmm31, %%zmm21\n "      \
    op " %%zmm30, %%zmm31, %%zmm22\n " op " %%zmm30, %%zmm31, %%zmm23\n " op " %%zmm30, %%zmm31, %%zmm24\n "      \
    op " %%zmm30, %%zmm31, %%zmm25\n " op " %%zmm30, %%zmm31, %%zmm26\n " op " %%zmm30, %%zmm31, %%zmm27\n"

// 12 independent chains of vpdpbusd zmm (64 multiply-adds each) or, for the A16 kernel, vpdpwssd zmm (32), 8 times
// per iteration (a separate function: it needs AVX-512 registers).
__attribute__((target("avx512f,avx512vnni"))) double chain_zmm(long iters, bool words) {
    if (words) {
        for (long it = 0; it < iters; ++it)
            __asm__ volatile(EF_REPEAT8(EF_ZMM12("vpdpwssd"))
                             ::: "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm24",
                                 "xmm25", "xmm26", "xmm27");
        return double(iters) * 96 * 32 * 2;
    }
    for (long it = 0; it < iters; ++it)
        __asm__ volatile(EF_REPEAT8(EF_ZMM12("vpdpbusd"))
                         ::: "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm24",
                             "xmm25", "xmm26", "xmm27");
    return double(iters) * 96 * 64 * 2;
}

// 4 independent accumulator tiles (tmm0-3, 16 x 16 int32) fed by tmm4-7, 8 tdpbssd per iteration (GCC's tile
// intrinsics are volatile asm: nothing folds). Called only where the amx kernel is available, i.e. where Linux granted
// this process the tile data (gemm_dispatch.cpp).
__attribute__((target("amx-tile,amx-int8"))) double chain_tiles(long iters) {
    load_tiles_16x64();
    _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);  // (statements: the intrinsics are asm macros)
    _tile_zero(4); _tile_zero(5); _tile_zero(6); _tile_zero(7);
    for (long it = 0; it < iters; ++it) {
        _tile_dpbssd(0, 4, 5); _tile_dpbssd(1, 4, 6); _tile_dpbssd(2, 5, 7); _tile_dpbssd(3, 6, 7);
        _tile_dpbssd(0, 5, 6); _tile_dpbssd(1, 5, 7); _tile_dpbssd(2, 4, 6); _tile_dpbssd(3, 4, 7);
    }
    _tile_release();
    return double(iters) * 8 * 16 * 16 * 64 * 2;
}

// Each chain feeds its own result back in, so no two chains compute the same thing and nothing folds away.
__attribute__((target("avx2,avxvnni"))) double chain_ops(long iters, Op op) {
    __m256i acc[kChains];
    __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(-2);
    const __m256i ones = _mm256_set1_epi16(1);
    for (int i = 0; i < kChains; ++i) acc[i] = _mm256_set1_epi32(i);
    if (op == Op::VpdpbusdZmm || op == Op::VpdpwssdZmm) return chain_zmm(iters, op == Op::VpdpwssdZmm);
    if (op == Op::Tdpbssd) return chain_tiles(iters);
    if (op == Op::Maddubs) {
        for (long it = 0; it < iters; ++it)
            __asm__ volatile(EF_REPEAT8("vpmaddubsw %%ymm14, %%ymm15, %%ymm0\n vpmaddubsw %%ymm14, %%ymm15, %%ymm1\n")
                             ::: "xmm0", "xmm1");
        return double(iters) * 16 * 32 * 2;
    }
    if (op == Op::Pmaddwd) {  // the AVX2 A16 kernel's multiply: 16 int16 products summed in pairs
        for (long it = 0; it < iters; ++it)
            __asm__ volatile(EF_REPEAT8("vpmaddwd %%ymm14, %%ymm15, %%ymm0\n vpmaddwd %%ymm14, %%ymm15, %%ymm1\n")
                             ::: "xmm0", "xmm1");
        return double(iters) * 16 * 16 * 2;
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

// CPU time of the calling thread. The per-core rates divide by it rather than by wall time: on a shared machine
// other processes' time slices then do not count against us (their use of shared caches still does).
double thread_cpu_seconds() {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// Per-core GOPS of chain_ops on this thread: the best of 10 runs of about seconds / 10 each, per CPU second.
double core_chains(double seconds, Op op) {
    long iters = 1 << 12;
    for (;;) {
        const double t0 = thread_cpu_seconds();
        chain_ops(iters, op);
        const double dt = thread_cpu_seconds() - t0;
        if (dt > 0.005) {
            iters = long(iters * seconds / 10 / dt) + 1;
            break;
        }
        iters *= 4;
    }
    double best = 0;
    for (int i = 0; i < 10; ++i) {
        const double t0 = thread_cpu_seconds();
        const double ops = chain_ops(iters, op);
        best = std::max(best, ops / (thread_cpu_seconds() - t0) / 1e9);
    }
    return best;
}

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

// GOPS of `fn` over the default model's prefill matmuls (T = 128 tokens), each split into the channel blocks
// Forward::matmul makes for `threads` threads: one layer ("layer"), and the matmuls with K = 576 and with K = 1536
// alone. With a pool: the blocks run on its threads, median rate in wall time. Without (pool == nullptr): per core,
// the blocks one after another on this thread, best rate per thread CPU second.
struct GemmRates {
    double layer, k576, k1536;
};

// Weight codes uniform in the range of `bits`-bit codes, [-2^(bits-1), 2^(bits-1) - 1] (the AVX2 kernel multiplies
// codes of <= 7, 6 and 5 bits in cheaper forms).
// Act: int8_t (the INT8 kernels, activations in [-127, 127]) or int16_t (the A16 kernels, [-32767, 32767]); Acc their
// output type (int32_t, int64_t).
template <class Act, class Acc, class Fn>
GemmRates measure_gemm(ThreadPool* pool, int threads, double seconds, Fn fn, int bits, bool per_k) {
    const int T = 128, H = 576, I = 1536, KV = 192;
    const int shapes[][2] = {{H, H}, {KV, H}, {KV, H}, {H, H}, {I, H}, {I, H}, {H, I}};  // [C, K]: q k v o gate up down
    // Activations and weights of random codes in the contract's ranges (speed does not depend on them).
    std::vector<Act> a(size_t(T) * I);
    unsigned seed = 12345;
    auto next = [&seed] { return seed = seed * 1103515245u + 12345u, int(seed >> 16); };
    constexpr int qmax = sizeof(Act) == 1 ? 127 : 32767;
    for (auto& x : a) x = Act(next() % (2 * qmax + 1) - qmax);
    std::vector<std::vector<int8_t>> w;
    for (const auto& s : shapes) {
        w.emplace_back(size_t(s[0]) * s[1]);
        for (auto& x : w.back()) x = int8_t(next() % (1 << bits) - (1 << (bits - 1)));
    }
    std::vector<Acc> y(size_t(T) * I);
    auto run = [&](int K) {  // the matmuls of one layer with this K (0: all)
        double ops = 0;
        for (size_t i = 0; i < w.size(); ++i) {
            const int C = shapes[i][0], Ki = shapes[i][1];
            if (K && Ki != K) continue;
            const int n_blocks = std::max(1, std::min((C + 15) / 16, 4 * threads));
            const int per = ((C + n_blocks - 1) / n_blocks + 15) / 16 * 16;
            auto block = [&](int j) {
                const int c0 = j * per, c1 = std::min(C, c0 + per);
                fn(T, c1 - c0, Ki, a.data(), Ki, w[i].data() + size_t(c0) * Ki, Ki, y.data() + c0, C);
            };
            if (pool)
                pool->parallel_for((C + per - 1) / per, block);
            else
                for (int j = 0; j < (C + per - 1) / per; ++j) block(j);
            ops += 2.0 * T * C * Ki;
        }
        return ops;
    };
    auto median_rate = [&](int K) {
        run(K);  // warm up: scratch buffers, caches
        std::vector<double> rates;
        const auto start = Clock::now();
        while (rates.size() < 5 || std::chrono::duration<double>(Clock::now() - start).count() < seconds) {
            const auto t0 = Clock::now();
            const double c0 = thread_cpu_seconds();
            const double ops = run(K);
            const double dt = pool ? std::chrono::duration<double>(Clock::now() - t0).count() : thread_cpu_seconds() - c0;
            rates.push_back(ops / dt / 1e9);
            if (rates.size() > 2000) break;
        }
        std::sort(rates.begin(), rates.end());
        return pool ? rates[rates.size() / 2] : rates.back();
    };
    GemmRates r{median_rate(0), 0, 0};
    if (per_k) {
        r.k576 = median_rate(H);
        r.k1536 = median_rate(I);
    }
    return r;
}

// Whether the dispatch offers kernel `name` on this CPU (its instruction is measurable only then).
bool offers_kernel(const char* name) {
    for (const auto& k : available_gemm_kernels())
        if (std::string(k.name) == name) return true;
    return false;
}

// The instruction a kernel is built on (its ceiling), as named in instruction_gops; "" when none is measured.
const char* kernel_instruction(const std::string& kernel) {
    if (kernel == "avx2") return "pmaddubsw";
    if (kernel == "avx-vnni") return "vpdpbusd";
    if (kernel == "avx512-vnni") return "vpdpbusd_zmm";
    if (kernel == "amx") return "tdpbssd";
    if (kernel == "neon-sdot") return "sdot";
    return "";
}

// The instruction an A16 kernel is built on, as named in a16_instruction_gops ("" for Neon's smlal: not measured).
const char* kernel16_instruction(const std::string& kernel) {
    if (kernel == "avx2") return "pmaddwd";
    if (kernel == "avx512-vnni") return "vpdpwssd_zmm";
    return "";
}

}  // namespace

int main(int argc, char** argv) {
    const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
    const double seconds = argc > 2 ? std::atof(argv[2]) : 0.5;
    if (threads < 1 || seconds <= 0) {
        std::fprintf(stderr, "usage: edgeflow-bench-int8 [threads >= 1] [seconds > 0]\n");
        return 2;
    }
    std::string instrs, steps, core_instrs, instrs16;
    std::vector<std::pair<std::string, double>> instr_gops, core_gops;
    double peak = 0;
    // is_peak: an INT8 instruction (the INT8 peak is the best of them); ceiling: a kernel's instruction, also
    // measured per core (every INT8 one, and the A16 kernels' pmaddwd and vpdpwssd)
    auto measure = [&](std::string& out, const char* name, Op op, bool is_peak, bool ceiling) {
        const double g = measure_chains(threads, seconds, op);
        out += std::string(out.empty() ? "" : ", ") + "\"" + name + "\": " + std::to_string(g);
        if (is_peak) peak = std::max(peak, g);
        if (ceiling) {
            instr_gops.emplace_back(name, g);
            const double c = core_chains(seconds, op);
            core_instrs += std::string(core_instrs.empty() ? "" : ", ") + "\"" + name + "\": " + std::to_string(c);
            core_gops.emplace_back(name, c);
        }
    };
#if defined(__x86_64__)
    if (!cpu_features().avx2) {
        std::fprintf(stderr, "edgeflow-bench-int8: this CPU has no AVX2; no INT8 peak to measure\n");
        return 3;
    }
    measure(instrs, "pmaddubsw", Op::Maddubs, true, true);
    measure(steps, "avx2", Op::Avx2Step, false, false);
    measure(instrs16, "pmaddwd", Op::Pmaddwd, false, true);
    if (cpu_features().avx_vnni) measure(instrs, "vpdpbusd", Op::Vpdpbusd, true, true);
    if (cpu_features().avx512_vnni) {
        measure(instrs, "vpdpbusd_zmm", Op::VpdpbusdZmm, true, true);
        measure(instrs16, "vpdpwssd_zmm", Op::VpdpwssdZmm, false, true);
    }
    if (offers_kernel("amx")) measure(instrs, "tdpbssd", Op::Tdpbssd, true, true);
#else
    if (!offers_kernel("neon-sdot")) {
        std::fprintf(stderr, "edgeflow-bench-int8: this CPU has no sdot; no INT8 peak to measure\n");
        return 3;
    }
    measure(instrs, "sdot", Op::Sdot, true, true);
#endif
    ThreadPool pool(threads);
    std::string kernels;
    double best = 0;
    auto lookup = [](const std::vector<std::pair<std::string, double>>& v, const std::string& key) {
        for (const auto& [name, g] : v)
            if (name == key) return g;
        return 0.0;
    };
    for (const auto& k : available_gemm_kernels()) {
        if (std::string(k.name) == "ref") continue;  // scalar: minutes per layer, and not a candidate
        const GemmRates r = measure_gemm<int8_t, int32_t>(&pool, threads, seconds, k.fn, 8, true);
        const GemmRates r7 = measure_gemm<int8_t, int32_t>(&pool, threads, seconds, k.fn, 7, false);
        const GemmRates r6 = measure_gemm<int8_t, int32_t>(&pool, threads, seconds, k.fn, 6, false);
        const GemmRates r5 = measure_gemm<int8_t, int32_t>(&pool, threads, seconds, k.fn, 5, false);
        const GemmRates core = measure_gemm<int8_t, int32_t>(nullptr, threads, seconds, k.fn, 8, false);
        const GemmRates core5 = measure_gemm<int8_t, int32_t>(nullptr, threads, seconds, k.fn, 5, false);
        if (std::string(k.name) == best_gemm_kernel().name) best = r.layer;
        const double ipeak = lookup(instr_gops, kernel_instruction(k.name));
        const double cpeak = lookup(core_gops, kernel_instruction(k.name));
        char buf[1024];
        std::snprintf(buf, sizeof buf,
                      "%s\"%s\": {\"layer_gops\": %.2f, \"k576_gops\": %.2f, \"k1536_gops\": %.2f, "
                      "\"layer_gops_7bit\": %.2f, \"layer_gops_6bit\": %.2f, \"layer_gops_5bit\": %.2f, "
                      "\"instruction\": \"%s\", \"of_instruction\": %.3f, "
                      "\"core_layer_gops\": %.2f, \"core_layer_gops_5bit\": %.2f, \"core_of_instruction\": %.3f}",
                      kernels.empty() ? "" : ", ", k.name, r.layer, r.k576, r.k1536, r7.layer, r6.layer, r5.layer,
                      kernel_instruction(k.name), ipeak > 0 ? r.layer / ipeak : 0.0, core.layer, core5.layer,
                      cpeak > 0 ? core.layer / cpeak : 0.0);
        kernels += buf;
    }
    // A16 x INT8 (HTP's A16W8 inputs): the same layer's matmuls with 16-bit activations, beside the INT8 kernel
    std::string kernels16;
    double best16 = 0;
    for (const auto& k : available_gemm16_kernels()) {
        if (std::string(k.name) == "ref") continue;
        const GemmRates r = measure_gemm<int16_t, int64_t>(&pool, threads, seconds, k.fn, 8, false);
        const GemmRates core = measure_gemm<int16_t, int64_t>(nullptr, threads, seconds, k.fn, 8, false);
        if (std::string(k.name) == best_gemm16_kernel().name) best16 = r.layer;
        const double ipeak = lookup(instr_gops, kernel16_instruction(k.name));
        const double cpeak = lookup(core_gops, kernel16_instruction(k.name));
        char buf[512];
        std::snprintf(buf, sizeof buf,
                      "%s\"%s\": {\"layer_gops\": %.2f, \"core_layer_gops\": %.2f, \"instruction\": \"%s\", "
                      "\"of_instruction\": %.3f, \"core_of_instruction\": %.3f}",
                      kernels16.empty() ? "" : ", ", k.name, r.layer, core.layer, kernel16_instruction(k.name),
                      ipeak > 0 ? r.layer / ipeak : 0.0, cpeak > 0 ? core.layer / cpeak : 0.0);
        kernels16 += buf;
    }
    std::printf("{\"threads\": %d, \"instruction_gops\": {%s}, \"a16_instruction_gops\": {%s}, "
                "\"step_gops\": {%s}, \"int8_peak_gops\": %.2f, "
                "\"core_instruction_gops\": {%s}, \"gemm_kernel\": \"%s\", \"gemm_gops\": %.2f, "
                "\"gemm_efficiency\": %.3f, \"gemm_kernels\": {%s}, \"gemm16_kernel\": \"%s\", "
                "\"gemm16_gops\": %.2f, \"a16_of_int8\": %.3f, \"gemm16_kernels\": {%s}}\n",
                threads, instrs.c_str(), instrs16.c_str(), steps.c_str(), peak, core_instrs.c_str(), best_gemm_kernel().name, best,
                best / peak, kernels.c_str(), best_gemm16_kernel().name, best16, best > 0 ? best16 / best : 0.0,
                kernels16.c_str());
    return 0;
}
