// The memory bandwidth a decode step can hope for: a streaming read of a buffer the size of the model's weights.
//
//   edgeflow-bench-stream [threads] [megabytes] [passes]     (defaults: 2, 106, 20)
//
// Decode is memory-bound: each token reads every weight once. This reads a buffer of `megabytes` (larger than any
// cache of the machines we run on, so it comes from DRAM like the weights do) split into one contiguous slice per
// thread, summing its bytes as 64-bit words (the compiler vectorizes the loop at -O3; the sum keeps the reads from
// being optimised away). Passes are timed separately and the best is reported, in GB/s (1e9 bytes) of the whole
// buffer: the ceiling of tokens/s is that over the bytes one token reads. Output: one JSON object.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

uint64_t sum_words(const uint64_t* p, size_t n) {
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;  // independent chains: the adds never limit the read rate
    size_t i = 0;
    for (; i + 4 <= n; i += 4) s0 += p[i], s1 += p[i + 1], s2 += p[i + 2], s3 += p[i + 3];
    for (; i < n; ++i) s0 += p[i];
    return s0 + s1 + s2 + s3;
}

}  // namespace

int main(int argc, char** argv) {
    const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
    const double megabytes = argc > 2 ? std::atof(argv[2]) : 106.0;
    const int passes = argc > 3 ? std::atoi(argv[3]) : 20;
    if (threads < 1 || megabytes <= 0 || passes < 1) {
        std::fprintf(stderr, "usage: edgeflow-bench-stream [threads >= 1] [megabytes > 0] [passes >= 1]\n");
        return 2;
    }
    const size_t words = size_t(megabytes * 1e6) / 8;
    std::vector<uint64_t> buf(words);
    for (size_t i = 0; i < words; ++i) buf[i] = i * 0x9E3779B97F4A7C15ull;  // touched: every page is resident
    std::vector<uint64_t> sums(threads);
    double best = 1e30;
    for (int pass = 0; pass < passes; ++pass) {
        const auto t0 = std::chrono::steady_clock::now();
        std::vector<std::thread> pool;
        for (int t = 0; t < threads; ++t)
            pool.emplace_back([&, t] {
                const size_t a = words * t / threads, b = words * (t + 1) / threads;
                sums[t] += sum_words(buf.data() + a, b - a);
            });
        for (auto& th : pool) th.join();
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    uint64_t check = 0;
    for (uint64_t s : sums) check ^= s;
    std::printf("{\"threads\": %d, \"megabytes\": %.1f, \"passes\": %d, \"best_s\": %.6f, \"read_gbps\": %.3f, "
                "\"checksum\": %llu}\n",
                threads, words * 8 / 1e6, passes, best, words * 8 / best / 1e9, (unsigned long long)(check & 0xffff));
    return 0;
}
