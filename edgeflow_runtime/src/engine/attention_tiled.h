// The tiled (flash-attention style) causal GQA attention kernel, written once over a GCC/Clang vector type of
// EF_ATTN_W floats and compiled once per SIMD width: attention_avx512.cpp (16), attention_avx2.cpp (8),
// attention_vec128.cpp (4: SSE2 on x86-64, Neon on aarch64). Include it from exactly such a file, after defining
//   EF_ATTN_W            floats per vector
//   EF_ATTN_RK, EF_ATTN_NB   score block: RK keys x NB vectors of query rows held in registers
//   EF_ATTN_RP, EF_ATTN_NC   P.V block: RP query rows x NC vectors of head dims held in registers
// Items of one row go to attention_ref instead (see run_item).
// Everything here has internal linkage, so the per-width copies never clash.
//
// One work item (attention.h: a KV head g, its query heads [h0, h1), query rows [t0, t1)) stacks its query rows as
// rows r = hh * nt + tt (hh = h - h0, tt = t - t0; rows = nh * nt) and keeps them *in vector lanes*:
//   Qt [d, rows_p]       the item's queries transposed (rows_p = rows rounded up to W; padded lanes are zero and
//                        carry the last row's position, so they never produce NaN)
//   St [BK, rows_p]      scores of one key tile, transposed: St[j, r] = scale * k_j . q_r, then P = exp(St - m)
//   m, l, alpha [rows_p] running max, running sum, rescale factor of the online softmax
//   O  [rows, dp]        unnormalised output rows (dp = d rounded up to W)
// Keys and values are read straight from the KV cache (row j of KV head g at k + j * kv_stride + g * d): a score
// block broadcasts one key element against a vector of query rows, and a P.V block broadcasts one probability against
// a vector of value elements, so neither needs a transposed copy, and the softmax's max and sum over keys are
// element-wise vector operations (no horizontal reductions). A head_dim that is not a multiple of W copies each value
// tile into a zero-padded buffer first.
//
// A decode item that is a part of the keys (attention_plan with split_keys) runs its key range only and leaves O, m
// and l for attention_merge_parts.
//
// Causal mask: key j is visible to row r iff j <= qpos[r]. Key tiles run to the item's last position; only tiles
// reaching past its first position (the diagonal ones) are masked, with the finite value kMasked (so that a row whose
// tile is fully masked keeps a finite max and exp(kMasked - m) underflows to exactly 0, never NaN).
//
// Numerics against attention_ref: the same exp polynomial and the same order per score (dot product, then times
// scale); dot products and sums associate differently (vector lanes, tiles) and the output is O / l instead of a sum
// of p / l terms. tests/test_ops.cpp bounds the difference.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "attention.h"
#include "vec_exp.h"

#ifndef EF_ATTN_W
#error "define EF_ATTN_W and the register blocking (EF_ATTN_RK, _NB, _RP, _NC) before including attention_tiled.h"
#endif

namespace edgeflow {
namespace {

constexpr int W = EF_ATTN_W;
constexpr int BK = 64;  // keys per tile
constexpr int RK = EF_ATTN_RK, NB = EF_ATTN_NB, RP = EF_ATTN_RP, NC = EF_ATTN_NC;
static_assert(BK % RK == 0, "a full key tile is a whole number of score blocks");
constexpr float kMasked = -1e30f;

typedef float vf __attribute__((vector_size(W * sizeof(float))));
typedef int32_t vi __attribute__((vector_size(W * sizeof(int32_t))));

inline vf load(const float* p) {
    vf v;
    std::memcpy(&v, p, sizeof v);  // an unaligned vector load
    return v;
}
inline void store(float* p, vf v) { std::memcpy(p, &v, sizeof v); }
inline vf splat(float s) { return vf{} + s; }
inline vf vmax(vf a, vf b) { return a > b ? a : b; }

// exp_approx lane by lane (vec_exp.h), except that inputs below -87.33 give exactly 0 (masked scores).
inline vf vexp(vf x) { return vexp_approx<vf, vi, true>(x); }

// St[kk, n * W + lane] = scale * sum_i k[kk * ldk + i] * qt[i * ldq + n * W + lane] for kk < R, n < N: R keys
// against N vectors of query rows, R * N accumulators in registers.
template <int R, int N>
void score_block(int d, const float* k, int ldk, const float* qt, int ldq, float scale, float* st, int ldst) {
    vf acc[R][N];
#pragma GCC unroll 16
    for (int kk = 0; kk < R; ++kk)
#pragma GCC unroll 16
        for (int n = 0; n < N; ++n) acc[kk][n] = vf{};
    for (int i = 0; i < d; ++i) {
        vf qv[N];
#pragma GCC unroll 16
        for (int n = 0; n < N; ++n) qv[n] = load(qt + size_t(i) * ldq + n * W);
#pragma GCC unroll 16
        for (int kk = 0; kk < R; ++kk) {
            const vf b = splat(k[size_t(kk) * ldk + i]);
#pragma GCC unroll 16
            for (int n = 0; n < N; ++n) acc[kk][n] += b * qv[n];
        }
    }
#pragma GCC unroll 16
    for (int kk = 0; kk < R; ++kk)
#pragma GCC unroll 16
        for (int n = 0; n < N; ++n) store(st + size_t(kk) * ldst + n * W, acc[kk][n] * scale);
}

// o[r, n * W + lane] = alpha[r] * o[r, ...] + sum_{j < nk} p[j * ldp + r] * v[j * ldv + n * W + lane] for r < R,
// n < N: the online softmax's rescale folded into the P.V accumulation.
template <int R, int N>
void pv_block(int nk, const float* p, int ldp, const float* alpha, const float* v, int ldv, float* o, int ldo) {
    vf acc[R][N];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
        const vf a = splat(alpha[r]);
#pragma GCC unroll 16
        for (int n = 0; n < N; ++n) acc[r][n] = load(o + size_t(r) * ldo + n * W) * a;
    }
    for (int j = 0; j < nk; ++j) {
        vf vv[N];
#pragma GCC unroll 16
        for (int n = 0; n < N; ++n) vv[n] = load(v + size_t(j) * ldv + n * W);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
            const vf b = splat(p[size_t(j) * ldp + r]);
#pragma GCC unroll 16
            for (int n = 0; n < N; ++n) acc[r][n] += b * vv[n];
        }
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
        for (int n = 0; n < N; ++n) store(o + size_t(r) * ldo + n * W, acc[r][n]);
}

// Tables of the block shapes for the remainders: score_table[r - 1][n - 1] = score_block<r, n>, and so on.
using ScoreFn = void (*)(int, const float*, int, const float*, int, float, float*, int);
using PvFn = void (*)(int, const float*, int, const float*, const float*, int, float*, int);

template <int R, size_t... I>
constexpr std::array<ScoreFn, sizeof...(I)> score_row(std::index_sequence<I...>) {
    return {&score_block<R, int(I) + 1>...};
}
template <size_t... I>
constexpr std::array<std::array<ScoreFn, NB>, sizeof...(I)> score_table(std::index_sequence<I...>) {
    return {score_row<int(I) + 1>(std::make_index_sequence<NB>())...};
}
template <int R, size_t... I>
constexpr std::array<PvFn, sizeof...(I)> pv_row(std::index_sequence<I...>) {
    return {&pv_block<R, int(I) + 1>...};
}
template <size_t... I>
constexpr std::array<std::array<PvFn, NC>, sizeof...(I)> pv_table(std::index_sequence<I...>) {
    return {pv_row<int(I) + 1>(std::make_index_sequence<NC>())...};
}
constexpr auto kScore = score_table(std::make_index_sequence<RK>());
constexpr auto kPv = pv_table(std::make_index_sequence<RP>());

// The working memory of one item, per thread and reused (grows to the largest item seen).
float* item_scratch(size_t n) {
    thread_local std::vector<float> buf;
    if (buf.size() < n) buf.resize(n);
    return buf.data();
}

inline int round_up(int x, int m) { return (x + m - 1) / m * m; }

void run_item(const AttentionArgs& a, const AttentionItem& it) {
    const int d = a.d, dp = round_up(d, W);
    const int nh = it.h1 - it.h0, nt = it.t1 - it.t0, rows = nh * nt;
    // A single row would leave all but one vector lane idle: there the reference, which vectorizes over head_dim
    // instead, is faster. From 2-3 rows on (a decode token's GQA group) the tiled kernel wins (bench_attention at
    // T = 1, 640 cached keys, 2 threads: avx2 0.04 ms, avx512 0.06 ms, reference per head 0.12 ms for 9 heads).
    if (rows == 1 && a.out_stride == a.q_stride && it.part < 0) {
        float* scratch = item_scratch(size_t(a.pos0) + it.t1);
        for (int h = it.h0; h < it.h1; ++h)
            attention_ref(nt, a.pos0 + it.t0, d, a.q + size_t(it.t0) * a.q_stride + size_t(h) * d, a.q_stride,
                          a.k + size_t(it.kv_head) * d, a.v + size_t(it.kv_head) * d, a.kv_stride,
                          a.out + size_t(it.t0) * a.out_stride + size_t(h) * d, scratch);
        attention_quantize_item(a, it);
        return;
    }
    const int rows_p = round_up(rows, W), nrv = rows_p / W;
    // keys [k_begin, k_end): the last row's context, or a decode part's share of it (it.part >= 0)
    const int first_pos = a.pos0 + it.t0;
    const int k_begin = item_keys(a, it).begin, k_end = item_keys(a, it).end;
    const bool pad_v = dp != d;

    float* qt = item_scratch(size_t(d) * rows_p + size_t(BK) * rows_p + 4 * size_t(rows_p) + size_t(rows) * dp +
                             (pad_v ? size_t(BK) * dp : 0));
    float* st = qt + size_t(d) * rows_p;  // [BK, rows_p]
    float* m = st + size_t(BK) * rows_p;  // [rows_p] each
    float* l = m + rows_p;
    float* alpha = l + rows_p;
    float* qpos = alpha + rows_p;      // positions as floats (exact below 2^24)
    float* o = qpos + rows_p;          // [rows, dp]
    float* vpad = o + size_t(rows) * dp;  // [BK, dp] when d % W != 0

    // Qt, positions, running state.
    for (int r = 0; r < rows_p; ++r) {
        const int rr = r < rows ? r : rows - 1;
        const int hh = rr / nt, tt = rr % nt;
        qpos[r] = float(a.pos0 + it.t0 + tt);
        const float* qr = a.q + size_t(it.t0 + tt) * a.q_stride + size_t(it.h0 + hh) * d;
        for (int i = 0; i < d; ++i) qt[size_t(i) * rows_p + r] = r < rows ? qr[i] : 0.f;
        m[r] = kMasked;
        l[r] = 0.f;
    }
    std::fill(o, o + size_t(rows) * dp, 0.f);
    if (pad_v)
        for (int j = 0; j < BK; ++j) std::fill(vpad + size_t(j) * dp + d, vpad + size_t(j + 1) * dp, 0.f);

    const float scale = 1.f / std::sqrt(float(d));
    const float* kg = a.k + size_t(it.kv_head) * d;
    const float* vg = a.v + size_t(it.kv_head) * d;
    for (int kj0 = k_begin; kj0 < k_end; kj0 += BK) {
        const int nk = std::min(BK, k_end - kj0);
        const float* kt = kg + size_t(kj0) * a.kv_stride;

        // St = scale * K_tile . Qt, in blocks of RK keys x NB row vectors (remainders through the tables).
        for (int j = 0; j < nk; j += RK) {
            const int rk = std::min(RK, nk - j);
            for (int c = 0; c < nrv; c += NB) {
                const int nb = std::min(NB, nrv - c);
                kScore[rk - 1][nb - 1](d, kt + size_t(j) * a.kv_stride, a.kv_stride, qt + c * W, rows_p, scale,
                                       st + size_t(j) * rows_p + c * W, rows_p);
            }
        }
        // Diagonal tile: hide keys after each row's position.
        if (kj0 + nk - 1 > first_pos)
            for (int j = 0; j < nk; ++j) {
                const vf kp = splat(float(kj0 + j));
                float* sj = st + size_t(j) * rows_p;
                for (int c = 0; c < rows_p; c += W) store(sj + c, kp > load(qpos + c) ? splat(kMasked) : load(sj + c));
            }
        // Online softmax, row vector by row vector: new max, P = exp(St - max), rescale of the old sum.
        for (int c = 0; c < rows_p; c += W) {
            const vf m_old = load(m + c);
            vf mx = m_old;
            for (int j = 0; j < nk; ++j) mx = vmax(mx, load(st + size_t(j) * rows_p + c));
            vf sum = vf{};
            for (int j = 0; j < nk; ++j) {
                float* s = st + size_t(j) * rows_p + c;
                const vf e = vexp(load(s) - mx);
                store(s, e);
                sum += e;
            }
            const vf al = vexp(m_old - mx);
            store(alpha + c, al);
            store(l + c, load(l + c) * al + sum);
            store(m + c, mx);
        }
        // O = alpha * O + P . V_tile, in blocks of RP rows x NC vectors of head dims.
        const float* vt = vg + size_t(kj0) * a.kv_stride;
        int ldv = a.kv_stride;
        if (pad_v) {
            for (int j = 0; j < nk; ++j) std::memcpy(vpad + size_t(j) * dp, vt + size_t(j) * a.kv_stride, d * sizeof(float));
            vt = vpad;
            ldv = dp;
        }
        for (int r = 0; r < rows; r += RP) {
            const int rp = std::min(RP, rows - r);
            for (int c = 0; c < dp; c += NC * W) {
                const int nc = std::min(NC, (dp - c) / W);
                kPv[rp - 1][nc - 1](nk, st + r, rows_p, alpha + r, vt + c, ldv, o + size_t(r) * dp + c, dp);
            }
        }
    }

    if (it.part >= 0) {  // a decode part (one row per query head): O, m and l for attention_merge_parts
        for (int r = 0; r < rows; ++r) {
            float* part = attention_part(a, it, r);  // (rows: the item's query heads, one row each)
            std::memcpy(part, o + size_t(r) * dp, d * sizeof(float));
            part[d] = m[r], part[d + 1] = l[r];
        }
        return;
    }
    // out = O / l.
    for (int r = 0; r < rows; ++r) {
        const int hh = r / nt, tt = r % nt;
        float* orow = a.out + size_t(it.t0 + tt) * a.out_stride + size_t(it.h0 + hh) * d;
        const float inv = 1.f / l[r];
        for (int i = 0; i < d; ++i) orow[i] = o[size_t(r) * dp + i] * inv;
    }
    attention_quantize_item(a, it);
}

}  // namespace
}  // namespace edgeflow
