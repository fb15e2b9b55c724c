#include "forward.h"

#include <algorithm>

#include "attention.h"
#include "ops.h"

namespace edgeflow {

void KvCache::init(const LlamaConfig& cfg, int ctx_len) {
    ctx = ctx_len;
    kv_dim = cfg.kv_dim();
    k.assign(size_t(cfg.n_layers) * ctx * kv_dim, 0.f);
    v.assign(size_t(cfg.n_layers) * ctx * kv_dim, 0.f);
}

void ChunkState::init(const LlamaConfig& cfg, int pos, const int32_t* toks, int n) {
    pos0 = pos;
    T = n;
    tokens.assign(toks, toks + n);
    const size_t wide = size_t(T) * std::max({cfg.hidden, cfg.intermediate, cfg.q_dim()});
    x.resize(size_t(T) * cfg.hidden);
    h.resize(size_t(T) * std::max(cfg.hidden, cfg.q_dim()));
    q.resize(size_t(T) * cfg.q_dim());
    for (auto* b : {&xq0, &xq1, &xq2}) b->resize(2 * wide);  // int8 codes, or int16 ones for A16 linears
    for (auto* b : {&acc0, &acc1, &acc2}) b->resize(wide);
}

Forward::Forward(const Model& model, KvCache& cache, ThreadPool& cpu, ThreadPool& accel)
    : model_(model), cache_(cache), cpu_(cpu), accel_(accel), kernel_(best_gemm_kernel()),
      kernel16_(best_gemm16_kernel()), attention_(best_attention_kernel()), decode_attention_(decode_attention_kernel()),
      lm_head_(lm_head_kernel()) {
    const int half = model.cfg.head_dim / 2;
    rope_cos_.resize(size_t(cache.ctx) * half);
    rope_sin_.resize(size_t(cache.ctx) * half);
    rope_tables(cache.ctx, model.cfg.head_dim, model.cfg.rope_theta, rope_cos_.data(), rope_sin_.data());
}

// The accelerator lane's matmul (QLinear): acc [T, C] gets the int32 sums (float outputs) or the output codes
// (requantized: the sums of an A8 linear in place, an A16 linear's int64 sums through a per-thread buffer). Splits the
// output channels into blocks of a multiple of 16 (the kernels' channel block), a few per thread so that uneven
// progress evens out.
void accel_matmul(ThreadPool& pool, const GemmKernel& k8, const Gemm16Kernel& k16, const int8_t* xq, int T,
                  const QLinear& w, int32_t* acc) {
    const int n_blocks = std::max(1, std::min((w.C + 15) / 16, 4 * pool.size()));
    const int per = ((w.C + n_blocks - 1) / n_blocks + 15) / 16 * 16;
    const int n = (w.C + per - 1) / per;
    pool.parallel_for(n, [&](int i) {
        const int c0 = i * per, nc = std::min(w.C, c0 + per) - c0;
        const int8_t* b = w.codes.data() + size_t(c0) * w.K;
        if (w.act_bits == 16) {
            thread_local std::vector<int64_t> sums;
            sums.resize(size_t(T) * nc);
            k16.fn(T, nc, w.K, reinterpret_cast<const int16_t*>(xq), w.K, b, w.K, sums.data(), nc);
            requantize_rows(T, nc, sums.data(), nc, w.requant.data() + c0, w.out_qmax(), acc + c0, w.C);
            return;
        }
        k8.fn(T, nc, w.K, xq, w.K, b, w.K, acc + c0, w.C);
        if (w.requantized()) requantize_rows(T, nc, acc + c0, w.C, w.requant.data() + c0, w.out_qmax(), acc + c0, w.C);
    });
}

void Forward::matmul(const int8_t* xq, int T, const QLinear& w, int32_t* acc) const {
    accel_matmul(accel_, kernel_, kernel16_, xq, T, w, acc);
}

// Row r of a linear's input codes in a ChunkState buffer of rows of K codes: int8, or int16 for A16.
static int8_t* input_row(int8_t* base, const QLinear& w, size_t r) {
    return base + r * w.K * (w.act_bits / 8);
}

// Row-wise operators split into one block of consecutive tokens per CPU thread: fn(t0, n) handles rows t0..t0+n-1.
template <class F>
static void for_row_blocks(ThreadPool& pool, int T, F&& fn) {
    const int per = (T + pool.size() - 1) / pool.size();
    pool.parallel_for((T + per - 1) / per, [&](int i) { fn(i * per, std::min(per, T - i * per)); });
}

void Forward::embed(ChunkState& s) const {
    const auto& e = model_.embed;
    for (int t = 0; t < s.T; ++t)
        if (s.tokens[t] < 0 || s.tokens[t] >= e.rows)
            throw EngineError("token id " + std::to_string(s.tokens[t]) + " at position " +
                              std::to_string(s.pos0 + t) + " is outside the vocabulary [0, " +
                              std::to_string(e.rows) + ")");
    std::vector<const int8_t*> rows(s.T);
    std::vector<float> scales(s.T);
    for (int t = 0; t < s.T; ++t) rows[t] = e.row(s.tokens[t]), scales[t] = e.w_scale.data()[s.tokens[t]];
    embed_rows(s.T, e.cols, rows.data(), scales.data(), s.x.data());
}

// x += dequantize(acc) when a matmul result is pending (residual add), then h = RMSNorm(x) and one quantized copy of h
// per consuming linear, each with that linear's input multiplier and width.
void Forward::residual_norm_quantize(ChunkState& s, const QLinear* pending, const std::vector<float>& norm,
                                     std::initializer_list<std::pair<const QLinear*, int8_t*>> outs) const {
    const auto& cfg = model_.cfg;
    const int H = cfg.hidden;
    for_row_blocks(cpu_, s.T, [&](int t0, int n) {
        const size_t o = size_t(t0) * H;
        if (pending) dequantize_add_rows(n, H, s.acc0.data() + o, H, pending->scale.data(), s.x.data() + o);
        rmsnorm_rows(n, H, s.x.data() + o, norm.data(), cfg.rms_eps, s.h.data() + o);
        for (const auto& [w, xq] : outs)
            quantize_rows_bits(w->act_bits, n, H, s.h.data() + o, w->m.data(), input_row(xq, *w, t0));
    });
}

void Forward::attn_in(int layer, ChunkState& s) const {
    const auto& L = model_.layers[layer];
    const QLinear* prev_down = layer > 0 ? &model_.layers[layer - 1].down : nullptr;
    residual_norm_quantize(s, prev_down, L.attn_norm, {{&L.q, s.xq0.data()}, {&L.k, s.xq1.data()}, {&L.v, s.xq2.data()}});
}

void Forward::qkv(int layer, ChunkState& s) const {
    const auto& L = model_.layers[layer];
    matmul(s.xq0.data(), s.T, L.q, s.acc0.data());
    matmul(s.xq1.data(), s.T, L.k, s.acc1.data());
    matmul(s.xq2.data(), s.T, L.v, s.acc2.data());
}

void Forward::attention(int layer, ChunkState& s) const {
    if (s.branches.empty()) return attend(layer, s, 0, s.T);
    // Sibling branches all continue position pos0: each writes its keys and values there and attends before the next
    // overwrites them, so a branch computes exactly what it would alone (the cache keeps the last branch's rows).
    int r0 = 0;
    for (const int n : s.branches) {
        attend(layer, s, r0, n);
        r0 += n;
    }
}

void Forward::attend(int layer, ChunkState& s, int r0, int n_rows) const {
    const auto& cfg = model_.cfg;
    const auto& L = model_.layers[layer];
    const int qd = cfg.q_dim(), kvd = cfg.kv_dim();
    if (s.pos0 + n_rows > cache_.ctx)
        throw EngineError("positions up to " + std::to_string(s.pos0 + n_rows) + " exceed the context of " +
                          std::to_string(cache_.ctx));
    // One pass per row block: q = RoPE(dequantize(acc0)); k and v are dequantized (k with RoPE) straight into this
    // layer's KV cache at positions pos0.. (cache rows are kv_dim floats, so the rows' keys are contiguous).
    float* kc = cache_.k_at(layer, 0);
    float* vc = cache_.v_at(layer, 0);
    for_row_blocks(cpu_, n_rows, [&](int t0, int n) {
        const size_t oq = size_t(r0 + t0) * qd, okv = size_t(r0 + t0) * kvd;
        const int p = s.pos0 + t0;
        dequantize_rope_rows(n, cfg.n_heads, cfg.head_dim, p, s.acc0.data() + oq, qd, L.q.scale.data(),
                             rope_cos_.data(), rope_sin_.data(), s.q.data() + oq);
        dequantize_rope_rows(n, cfg.n_kv_heads, cfg.head_dim, p, s.acc1.data() + okv, kvd, L.k.scale.data(),
                             rope_cos_.data(), rope_sin_.data(), kc + size_t(p) * kvd);
        dequantize_rows(n, kvd, s.acc2.data() + okv, kvd, L.v.scale.data(), vc + size_t(p) * kvd);
    });
    // Tiled attention (attention.h) over work items of (KV head, its query heads, query block), largest first;
    // each item writes its heads' slices of its rows of h and their int8 copy for o_proj.
    AttentionArgs a;
    a.T = n_rows;
    a.pos0 = s.pos0;
    a.d = cfg.head_dim;
    a.n_heads = cfg.n_heads;
    a.n_kv_heads = cfg.n_kv_heads;
    a.q = s.q.data() + size_t(r0) * qd;
    a.q_stride = qd;
    a.k = kc;
    a.v = vc;
    a.kv_stride = kvd;
    a.out = s.h.data() + size_t(r0) * qd;
    a.out_stride = qd;
    const bool a8 = L.o.act_bits == 8;  // an A16 o_proj's input is quantized after the kernels, below
    a.out_q = a8 ? s.xq0.data() + size_t(r0) * qd : nullptr;  // each item quantizes its own slice for o_proj
    a.out_m = L.o.m.data();
    a.out_q_stride = qd;
    attention_run(n_rows == 1 ? decode_attention_ : attention_, a, cpu_.size(),
                  [&](int n, const auto& fn) { cpu_.parallel_for(n, fn); });
    if (!a8)
        for_row_blocks(cpu_, n_rows, [&](int t0, int n) {
            quantize_rows16(n, qd, a.out + size_t(t0) * qd, L.o.m.data(),
                            reinterpret_cast<int16_t*>(input_row(s.xq0.data(), L.o, r0 + t0)));
        });
}

void Forward::o_proj(int layer, ChunkState& s) const {
    matmul(s.xq0.data(), s.T, model_.layers[layer].o, s.acc0.data());
}

void Forward::ffn_in(int layer, ChunkState& s) const {
    const auto& L = model_.layers[layer];
    residual_norm_quantize(s, &L.o, L.ffn_norm, {{&L.gate, s.xq1.data()}, {&L.up, s.xq2.data()}});
}

void Forward::gate_up(int layer, ChunkState& s) const {
    const auto& L = model_.layers[layer];
    matmul(s.xq1.data(), s.T, L.gate, s.acc1.data());
    matmul(s.xq2.data(), s.T, L.up, s.acc2.data());
}

void Forward::swiglu(int layer, ChunkState& s) const {
    const auto& cfg = model_.cfg;
    const auto& L = model_.layers[layer];
    const int I = cfg.intermediate;
    for_row_blocks(cpu_, s.T, [&](int t0, int n) {
        const size_t o = size_t(t0) * I;
        std::vector<float> rows(2 * size_t(I));  // one token's g and u: the row stays in L1 across the passes
        swiglu_quantize_rows_bits(L.down.act_bits, n, I, s.acc1.data() + o, s.acc2.data() + o, I, L.gate.scale.data(),
                                  L.up.scale.data(), L.down.m.data(), input_row(s.xq0.data(), L.down, t0),
                                  rows.data());
    });
}

void Forward::down(int layer, ChunkState& s) const {
    matmul(s.xq0.data(), s.T, model_.layers[layer].down, s.acc0.data());
}

void Forward::head(ChunkState& s, int rows) const {
    const auto& cfg = model_.cfg;
    const auto& last = model_.layers.back().down;
    const int H = cfg.hidden, V = cfg.vocab;
    dequantize_add_rows(s.T, H, s.acc0.data(), H, last.scale.data(), s.x.data());
    s.logit_rows = std::clamp(rows, 1, s.T);
    const float* x = s.x.data() + size_t(s.T - s.logit_rows) * H;
    rmsnorm_rows(s.logit_rows, H, x, model_.final_norm.data(), cfg.rms_eps, s.h.data());
    s.logits.resize(size_t(s.logit_rows) * V);
    const RowTable& w = model_.head();
    const int n = 4 * cpu_.size();
    const int per = ((V + n - 1) / n + 3) / 4 * 4;
    cpu_.parallel_for((V + per - 1) / per, [&](int i) {
        const int v0 = i * per, v1 = std::min(V, v0 + per);
        lm_head_.fn(s.logit_rows, H, V, v0, v1, s.h.data(), w.codes.data(), w.w_scale.data(), s.logits.data());
    });
}

void Forward::run_chunk(ChunkState& s, bool all_rows) const {
    embed(s);
    for (int l = 0; l < model_.cfg.n_layers; ++l) {
        attn_in(l, s);
        qkv(l, s);
        attention(l, s);
        o_proj(l, s);
        ffn_in(l, s);
        gate_up(l, s);
        swiglu(l, s);
        down(l, s);
    }
    head(s, all_rows ? s.T : 1);
}

}  // namespace edgeflow
