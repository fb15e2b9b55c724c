// The tiled attention kernels against the reference algorithm they replace, on the default model's attention shape
// (SmolLM2-135M: 9 query heads, 3 KV heads, head_dim 64), for `make bench`-style comparisons.
//
//   edgeflow-bench-attention [threads=2] [reps=5] [prompt=960] [chunk=128]
//
// Cases: every chunk of a `prompt`-token prefill cut into `chunk`-token chunks (T = chunk at pos0 = 0, chunk, ...,
// the later ones attending to the cached keys of the earlier ones), then the whole prompt as one chunk. Each case
// runs both ways on a pool of `threads` threads:
//   old    one work item per query head, attention_ref inside (the engine's previous Forward::attention)
//   tiled  attention_plan's items with each available kernel (best_attention_kernel() first)
// Times are the median over `reps` runs (min..max beside it), GFLOP/s count Q.K^T and P.V over the causal
// triangle (4 * head_dim flops per query row, head and visible key). The last lines sum the chunked prefill of one
// layer and print old / tiled. Also printed: the largest |tiled - old| over the outputs, relative to max |old|.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "attention.h"
#include "thread_pool.h"

using namespace edgeflow;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kHeads = 9, kKvHeads = 3, kHeadDim = 64;

struct Stat {
    double median, lo, hi;
};

template <class F>
Stat time_it(int reps, F&& f) {
    f();  // warm-up: caches, thread-local scratch
    std::vector<double> t;
    for (int r = 0; r < reps; ++r) {
        const auto a = Clock::now();
        f();
        t.push_back(std::chrono::duration<double>(Clock::now() - a).count());
    }
    std::sort(t.begin(), t.end());
    return {t[t.size() / 2], t.front(), t.back()};
}

void run_old(ThreadPool& pool, const AttentionArgs& a) {
    const int group = a.n_heads / a.n_kv_heads;
    pool.parallel_for(a.n_heads, [&](int h) {
        std::vector<float> scratch(size_t(a.pos0) + a.T);
        const int kv = (h / group) * a.d;
        attention_ref(a.T, a.pos0, a.d, a.q + h * a.d, a.q_stride, a.k + kv, a.v + kv, a.kv_stride,
                      a.out + h * a.d, scratch.data());
    });
}

void run_tiled(ThreadPool& pool, const AttentionKernel& kernel, const AttentionArgs& a) {
    const auto items = attention_plan(a, pool.size());
    pool.parallel_for(int(items.size()), [&](int i) { kernel.fn(a, items[i]); });
}

}  // namespace

int main(int argc, char** argv) {
    const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
    const int reps = argc > 2 ? std::atoi(argv[2]) : 5;
    const int prompt = argc > 3 ? std::atoi(argv[3]) : 960;
    const int chunk = argc > 4 ? std::atoi(argv[4]) : 128;
    if (threads < 1 || reps < 1 || prompt < 1 || chunk < 1) {
        std::fprintf(stderr, "usage: edgeflow-bench-attention [threads>=1] [reps>=1] [prompt>=1] [chunk>=1]\n");
        return 2;
    }
    const int qd = kHeads * kHeadDim, kvd = kKvHeads * kHeadDim;
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<float> q(size_t(prompt) * qd), k(size_t(prompt) * kvd), v(size_t(prompt) * kvd);
    for (auto* b : {&q, &k, &v})
        for (auto& x : *b) x = nd(rng);
    std::vector<float> out_old(q.size()), out_new(q.size());

    ThreadPool pool(threads);
    const auto kernels = attention_kernels();
    const AttentionKernel& best = best_attention_kernel();
    std::printf("edgeflow-bench-attention: %d threads, %d reps, heads %d/%d, head_dim %d; kernels:", threads, reps,
                kHeads, kKvHeads, kHeadDim);
    for (const auto& kn : kernels) std::printf(" %s%s", kn.name, kn.fn == best.fn ? " (best)" : "");
    std::printf("\ntimes: median (min..max) ms\n");
    std::printf("%6s %5s | %-24s |", "pos0", "T", "old");
    for (const auto& kn : kernels) std::printf(" %-24s %7s |", kn.name, "ratio");
    std::printf(" rel.err\n");

    std::vector<std::pair<int, int>> cases;
    for (int p = 0; p < prompt; p += chunk) cases.push_back({p, std::min(chunk, prompt - p)});
    const size_t n_chunked = cases.size();
    if (n_chunked > 1) cases.push_back({0, prompt});

    std::vector<double> sum_old(2, 0.0);
    std::vector<std::vector<double>> sum_new(2, std::vector<double>(kernels.size(), 0.0));
    for (size_t ci = 0; ci < cases.size(); ++ci) {
        const auto [pos0, T] = cases[ci];
        AttentionArgs a;
        a.T = T;
        a.pos0 = pos0;
        a.d = kHeadDim;
        a.n_heads = kHeads;
        a.n_kv_heads = kKvHeads;
        a.q = q.data() + size_t(pos0) * qd;
        a.q_stride = qd;
        a.k = k.data();
        a.v = v.data();
        a.kv_stride = kvd;
        a.out_stride = qd;
        double flops = 0;
        for (int t = 0; t < T; ++t) flops += 4.0 * kHeadDim * kHeads * (pos0 + t + 1);

        a.out = out_old.data();
        const Stat so = time_it(reps, [&] { run_old(pool, a); });
        std::printf("%6d %5d | %7.2f (%6.2f..%6.2f) %4.1fGF |", pos0, T, so.median * 1e3, so.lo * 1e3, so.hi * 1e3,
                    flops / so.median * 1e-9);
        const int bucket = ci < n_chunked ? 0 : 1;
        sum_old[bucket] += so.median;
        double err = 0, ref_max = 0;
        for (size_t kn = 0; kn < kernels.size(); ++kn) {
            a.out = out_new.data();
            const Stat sn = time_it(reps, [&] { run_tiled(pool, kernels[kn], a); });
            sum_new[bucket][kn] += sn.median;
            std::printf(" %7.2f (%6.2f..%6.2f) %4.1fGF %6.2fx |", sn.median * 1e3, sn.lo * 1e3, sn.hi * 1e3,
                        flops / sn.median * 1e-9, so.median / sn.median);
            for (size_t i = 0; i < size_t(T) * qd; ++i) {
                err = std::max(err, double(std::fabs(out_new[i] - out_old[i])));
                ref_max = std::max(ref_max, double(std::fabs(out_old[i])));
            }
        }
        std::printf(" %.1e\n", err / ref_max);
    }
    const char* label[2] = {"chunked prefill (one layer)", "one-chunk prefill (one layer)"};
    for (int b = 0; b < 2; ++b) {
        if (sum_old[b] == 0) continue;
        std::printf("%s: old %.2f ms", label[b], sum_old[b] * 1e3);
        for (size_t kn = 0; kn < kernels.size(); ++kn)
            std::printf(", %s %.2f ms (old/%s = %.2fx)", kernels[kn].name, sum_new[b][kn] * 1e3, kernels[kn].name,
                        sum_old[b] / sum_new[b][kn]);
        std::printf("\n");
    }
    return 0;
}
