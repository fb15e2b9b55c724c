// Causal grouped-query attention of one prompt chunk against the float KV cache (docs/quantized-artifact.md).
//
// Two implementations of the same maths:
//   attention_ref    one query head, one query row at a time: all scores, max, exp, sum, then the weighted sum of
//                    values (the engine's original algorithm; the scalar reference of the tests and the benchmark).
//   AttentionKernel  tiled, flash-attention style (attention_tiled.h): a block of query rows of the query heads that
//                    share one KV head against tiles of BK keys; scores of a tile as a small fp32 GEMM, an online
//                    softmax (running max and sum per row, earlier output rescaled when the max grows), then P.V
//                    accumulated into the output tile. Causal masking only on tiles that reach past the block's
//                    first query position. One build per SIMD width (AVX-512, AVX2+FMA, 128-bit: SSE2 / Neon),
//                    chosen at run time from CPUID. Items of very few rows (decode) run attention_ref inside.
//                    Agrees with attention_ref to within 2e-5 * max |v| per output (tests/test_ops.cpp; measured
//                    <= 1e-6 * max |v| on head_dim 24..128, GQA groups 1/3/4, odd T, pos0 > 0).
//
// Work is split into AttentionItems (a KV head, a range of its query heads, a block of query rows) so that a pool of
// any size gets enough similar-sized pieces: attention_plan orders them longest first (later query blocks attend to
// more keys) and a pool handing items out in order then balances the causal triangle.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace edgeflow {

// The operands of one attention call. Query row t (position pos0 + t), head h: q + t * q_stride + h * d; cached key
// and value of position j, KV head g: k / v + j * kv_stride + g * d, for j in [0, pos0 + T); out is laid out like q.
// Query head h reads KV head h / (n_heads / n_kv_heads).
struct AttentionArgs {
    int T = 0, pos0 = 0, d = 0, n_heads = 0, n_kv_heads = 0;
    const float* q = nullptr;
    int q_stride = 0;
    const float* k = nullptr;
    const float* v = nullptr;
    int kv_stride = 0;
    float* out = nullptr;
    int out_stride = 0;
    // Optional: each item also quantizes what it wrote (quantize_rows, ops.h, with per-feature multipliers
    // out_m [n_heads * d]) into out_q + t * out_q_stride + h * d, the int8 input of o_proj, saving a pass and a
    // barrier. Bit-identical to quantize_rows over the whole output afterwards.
    int8_t* out_q = nullptr;
    const float* out_m = nullptr;
    int out_q_stride = 0;
    // Decode items that cover part of the keys (attention_plan with split_keys) leave their partial results here,
    // attention_parts_size() floats: per part and query head of its group, d unnormalized output sums, then the
    // part's score maximum and its sum of exp(score - maximum); attention_merge_parts combines them.
    float* parts = nullptr;
};

// Query heads [h0, h1) (all reading KV head kv_head) for query rows [t0, t1) of the chunk; with part >= 0 (decode
// split across threads, flash-decoding) only the keys at positions [j0, j1), its result left in AttentionArgs::parts.
struct AttentionItem {
    int kv_head, h0, h1, t0, t1;
    int j0 = 0, j1 = 0, part = -1;
};

// Scalar reference for one query head: T query rows at positions pos0.. against keys/values at positions
// [0, pos0 + T); row t of q/out at q + t * q_stride, cached row j at k + j * kv_stride (the caller offsets q, k, v and
// out to the head). scratch >= pos0 + T floats.
void attention_ref(int T, int pos0, int d, const float* q, int q_stride, const float* k, const float* v,
                   int kv_stride, float* out, float* scratch);

// The out_q step of one item (a no-op without out_q); the kernels call it last.
void attention_quantize_item(const AttentionArgs& a, const AttentionItem& it);

// All heads of AttentionArgs with attention_ref, one head after another (single thread).
void attention_ref_all(const AttentionArgs& a);

// Work items covering every (query head, query row) of a exactly once, longest first, sized for n_threads. With
// split_keys (decode, a kernel whose `splits` accepts a), each KV head's keys are cut into parts of at least
// kMinKeysPerPart so that a few KV heads still give every thread the same work (SmolLM2-135M: 3 KV heads on 2
// threads were 2 rounds of one item, now 3 items per thread).
inline constexpr int kMinKeysPerPart = 256;
std::vector<AttentionItem> attention_plan(const AttentionArgs& a, int n_threads, bool split_keys = false);

// Floats the parts of `items` need in AttentionArgs::parts (0 when none is split).
size_t attention_parts_size(const AttentionArgs& a, const std::vector<AttentionItem>& items);

// Each split KV head's parts combined into its heads' outputs (rescaled to the largest part maximum), then quantized
// for o_proj like an unsplit item. Runs after every item of the plan.
void attention_merge_parts(const AttentionArgs& a, const std::vector<AttentionItem>& items);

// The keys an item reads, [begin, end): its last row's whole context, or a split item's part of it.
struct KeyRange {
    int begin, end;
};
inline KeyRange item_keys(const AttentionArgs& a, const AttentionItem& it) {
    return it.part < 0 ? KeyRange{0, a.pos0 + it.t1} : KeyRange{it.j0, it.j1};
}

// Where a split item leaves query head h0 + h's partial result in a.parts: d unnormalized output sums, then the
// part's maximum score and its sum of exp(score - maximum).
inline float* attention_part(const AttentionArgs& a, const AttentionItem& it, int h) {
    return a.parts + (size_t(it.part) * (it.h1 - it.h0) + h) * (a.d + 2);
}

using AttentionFn = void (*)(const AttentionArgs& a, const AttentionItem& item);

struct AttentionKernel {
    const char* name;  // "vec128", "avx2", "avx512" (prefill); "avx512-decode" (decode)
    AttentionFn fn;
    bool (*splits)(const AttentionArgs&) = nullptr;  // whether fn runs items of part of the keys for these args
};

// The tiled kernels this CPU can run, narrowest first (always "vec128"; kernel_choice.h's order).
std::vector<AttentionKernel> attention_kernels();

// The widest of attention_kernels(), or the one named by the environment variable EDGEFLOW_ATTENTION
// (vec128|avx2|avx512; a name this CPU cannot run is an error naming the choices).
const AttentionKernel& best_attention_kernel();

// The kernels for one query row per head (decode) this CPU can run, the best last: vec128; avx2 (its 8 lanes fit an
// item's few stacked rows: SmolLM2-135M's 3-head groups at 640 cached keys, 2 threads, 0.04 ms per layer against the
// reference's 0.12); with AVX-512, "avx512-decode" (attention_decode_avx512.cpp: a GQA group's heads against each key
// and value row loaded once, head_dim in registers; other shapes go to the tiled kernel).
std::vector<AttentionKernel> decode_attention_kernels();

// The last of decode_attention_kernels(), or the one EDGEFLOW_DECODE_ATTENTION names; with only EDGEFLOW_ATTENTION
// set, the prefill's choice (one name for both).
const AttentionKernel& decode_attention_kernel();

// One attention call: attention_plan(a, plan_threads, split where the kernel allows it), every item run through
// for_items(n, fn) (a pool's parallel_for, or a loop), then any parts merged. The engine's and the tests' one way.
template <class ForItems>
void attention_run(const AttentionKernel& kernel, const AttentionArgs& a, int plan_threads, ForItems&& for_items) {
    const bool split = kernel.splits && kernel.splits(a);
    const auto items = attention_plan(a, plan_threads, split);
    std::vector<float> parts(attention_parts_size(a, items));
    AttentionArgs args = a;
    args.parts = parts.data();
    for_items(int(items.size()), [&](int i) { kernel.fn(args, items[i]); });
    if (split) attention_merge_parts(args, items);
}

// attention_run with every item on the calling thread (tests, benchmarks).
void attention_tiled_all(const AttentionKernel& kernel, const AttentionArgs& a, int plan_threads = 1);

}  // namespace edgeflow
