// The attention reference, the work plan of the tiled kernels and their run-time choice (attention.h).
#include "attention.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "cpu_features.h"
#include "exp_approx.h"
#include "kernel_choice.h"
#include "model.h"
#include "ops.h"
#include "vector_clones.h"

namespace edgeflow {

#if defined(__x86_64__)
void attention_decode_avx512(const AttentionArgs& a, const AttentionItem& it);
bool attention_decode_avx512_splits(const AttentionArgs& a);
void attention_item_avx512(const AttentionArgs& a, const AttentionItem& it);
void attention_item_avx2(const AttentionArgs& a, const AttentionItem& it);
#endif
void attention_item_vec128(const AttentionArgs& a, const AttentionItem& it);

EF_VECTOR_CLONES
void attention_ref(int T, int pos0, int d, const float* q, int q_stride, const float* k, const float* v,
                   int kv_stride, float* out, float* scratch) {
    const float scale = 1.f / std::sqrt(float(d));
    for (int t = 0; t < T; ++t) {
        const int n_ctx = pos0 + t + 1;  // causal: keys at positions 0 .. pos0 + t
        const float* qt = q + size_t(t) * q_stride;
        float mx = -INFINITY;
        for (int j = 0; j < n_ctx; ++j) {
            const float* kj = k + size_t(j) * kv_stride;
            float s = 0.f;
#pragma omp simd reduction(+ : s)
            for (int i = 0; i < d; ++i) s += qt[i] * kj[i];
            s *= scale;
            scratch[j] = s;
            mx = s > mx ? s : mx;
        }
        float sum = 0.f;
#pragma omp simd reduction(+ : sum)
        for (int j = 0; j < n_ctx; ++j) {
            scratch[j] = exp_approx(scratch[j] - mx);
            sum += scratch[j];
        }
        const float inv = 1.f / sum;
        float* ot = out + size_t(t) * q_stride;
        std::memset(ot, 0, sizeof(float) * d);
        for (int j = 0; j < n_ctx; ++j) {
            const float p = scratch[j] * inv;
            const float* vj = v + size_t(j) * kv_stride;
#pragma omp simd
            for (int i = 0; i < d; ++i) ot[i] += p * vj[i];
        }
    }
}

void attention_quantize_item(const AttentionArgs& a, const AttentionItem& it) {
    if (!a.out_q) return;
    for (int t = it.t0; t < it.t1; ++t)
        for (int h = it.h0; h < it.h1; ++h)
            quantize_rows(1, a.d, a.out + size_t(t) * a.out_stride + size_t(h) * a.d, a.out_m + size_t(h) * a.d,
                          a.out_q + size_t(t) * a.out_q_stride + size_t(h) * a.d);
}

void attention_ref_all(const AttentionArgs& a) {
    if (a.out_stride != a.q_stride) throw EngineError("attention_ref_all: out must be laid out like q");
    std::vector<float> scratch(size_t(a.pos0) + a.T);
    const int group = a.n_heads / a.n_kv_heads;
    for (int h = 0; h < a.n_heads; ++h) {
        const int kv = (h / group) * a.d;
        attention_ref(a.T, a.pos0, a.d, a.q + size_t(h) * a.d, a.q_stride, a.k + kv, a.v + kv, a.kv_stride,
                      a.out + size_t(h) * a.d, scratch.data());
    }
}

// Items of ~64 stacked query rows (the query heads of one KV head share every key and value tile they load), at
// least 4 per thread while blocks can still shrink to 8 rows per head, and one query head per item when even that
// leaves fewer than 2 per thread, except at T = 1 (decode), where a KV head's query heads stay one item: their few
// stacked rows fill a vector kernel's lanes (decode_attention_kernel), one head alone would go to attention_ref.
// Sorted by work, largest first: rows x keys of the last row.
std::vector<AttentionItem> attention_plan(const AttentionArgs& a, int n_threads, bool split_keys) {
    if (a.T <= 0 || a.d <= 0 || a.n_kv_heads <= 0 || a.n_heads % a.n_kv_heads)
        throw EngineError("attention: bad shape (T " + std::to_string(a.T) + ", head_dim " + std::to_string(a.d) +
                          ", heads " + std::to_string(a.n_heads) + "/" + std::to_string(a.n_kv_heads) + ")");
    const int group = a.n_heads / a.n_kv_heads;
    if (split_keys && a.T == 1) {
        // parts per KV head: enough for 2 items per thread, none shorter than kMinKeysPerPart keys
        const int n = a.pos0 + 1;
        const int parts = std::min((2 * n_threads + a.n_kv_heads - 1) / a.n_kv_heads, n / kMinKeysPerPart);
        if (parts >= 2) {
            std::vector<AttentionItem> items;
            for (int g = 0; g < a.n_kv_heads; ++g)
                for (int p = 0; p < parts; ++p)
                    items.push_back({g, g * group, (g + 1) * group, 0, 1, int(int64_t(n) * p / parts),
                                     int(int64_t(n) * (p + 1) / parts), g * parts + p});
            return items;
        }
    }
    int bq = std::max(1, 64 / group);
    if (bq >= 8) bq = bq / 8 * 8;
    const auto n_blocks = [&](int b) { return (a.T + b - 1) / b; };
    while (bq > 8 && a.n_kv_heads * n_blocks(bq) < 4 * n_threads) bq = std::max(8, bq / 2);
    bq = std::min(bq, a.T);
    const int heads_per_item = a.T > 1 && a.n_kv_heads * n_blocks(bq) < 2 * n_threads ? 1 : group;

    std::vector<AttentionItem> items;
    for (int t0 = 0; t0 < a.T; t0 += bq)
        for (int g = 0; g < a.n_kv_heads; ++g)
            for (int h0 = g * group; h0 < (g + 1) * group; h0 += heads_per_item)
                items.push_back({g, h0, h0 + heads_per_item, t0, std::min(a.T, t0 + bq)});
    const auto work = [&](const AttentionItem& it) {
        return double(it.h1 - it.h0) * (it.t1 - it.t0) * (a.pos0 + it.t1);
    };
    std::stable_sort(items.begin(), items.end(),
                     [&](const AttentionItem& x, const AttentionItem& y) { return work(x) > work(y); });
    return items;
}

size_t attention_parts_size(const AttentionArgs& a, const std::vector<AttentionItem>& items) {
    int n = 0;
    for (const auto& it : items) n = std::max(n, it.part + 1);
    return size_t(n) * (a.n_heads / a.n_kv_heads) * (a.d + 2);
}

void attention_merge_parts(const AttentionArgs& a, const std::vector<AttentionItem>& items) {
    const int group = a.n_heads / a.n_kv_heads;
    for (int g = 0; g < a.n_kv_heads; ++g) {
        std::vector<const AttentionItem*> parts;  // this KV head's parts
        for (const auto& it : items)
            if (it.kv_head == g && it.part >= 0) parts.push_back(&it);
        if (parts.empty()) continue;
        for (int h = 0; h < group; ++h) {
            float mx = -INFINITY;
            for (const AttentionItem* it : parts) mx = std::max(mx, attention_part(a, *it, h)[a.d]);
            float* out = a.out + size_t(g * group + h) * a.d;  // T = 1: row 0
            std::fill(out, out + a.d, 0.f);
            float sum = 0.f;
            for (const AttentionItem* it : parts) {
                const float* p = attention_part(a, *it, h);
                const float scale = exp_approx(p[a.d] - mx);
                sum += scale * p[a.d + 1];
                for (int i = 0; i < a.d; ++i) out[i] += scale * p[i];
            }
            const float inv = 1.f / sum;
            for (int i = 0; i < a.d; ++i) out[i] *= inv;
        }
        attention_quantize_item(a, {g, g * group, (g + 1) * group, 0, 1});
    }
}

std::vector<AttentionKernel> attention_kernels() {
    std::vector<AttentionKernel> ks{{"vec128", attention_item_vec128}};
#if defined(__x86_64__)
    if (cpu_features().avx2) ks.push_back({"avx2", attention_item_avx2});
    if (cpu_features().avx512) ks.push_back({"avx512", attention_item_avx512});
#endif
    return ks;
}

const AttentionKernel& best_attention_kernel() {
    static const AttentionKernel chosen = choose_kernel(attention_kernels(), "EDGEFLOW_ATTENTION");
    return chosen;
}

// The tiled kernels run a decode item's part of the keys when it has 2 or more query heads (one head alone goes to
// attention_ref, which does not split).
static bool tiled_decode_splits(const AttentionArgs& a) { return a.T == 1 && a.n_heads / a.n_kv_heads >= 2; }

std::vector<AttentionKernel> decode_attention_kernels() {
    std::vector<AttentionKernel> ks{{"vec128", attention_item_vec128, tiled_decode_splits}};
#if defined(__x86_64__)
    if (cpu_features().avx2) ks.push_back({"avx2", attention_item_avx2, tiled_decode_splits});
    if (cpu_features().avx512) ks.push_back({"avx512-decode", attention_decode_avx512, attention_decode_avx512_splits});
#endif
    return ks;
}

const AttentionKernel& decode_attention_kernel() {
    static const AttentionKernel chosen = [] {
        const char* prefill = std::getenv("EDGEFLOW_ATTENTION");
        const char* decode = std::getenv("EDGEFLOW_DECODE_ATTENTION");
        if (prefill && *prefill && !(decode && *decode)) return best_attention_kernel();  // one name for both
        return choose_kernel(decode_attention_kernels(), "EDGEFLOW_DECODE_ATTENTION");
    }();
    return chosen;
}

void attention_tiled_all(const AttentionKernel& kernel, const AttentionArgs& a, int plan_threads) {
    attention_run(kernel, a, plan_threads, [](int n, const auto& fn) {
        for (int i = 0; i < n; ++i) fn(i);
    });
}

}  // namespace edgeflow
