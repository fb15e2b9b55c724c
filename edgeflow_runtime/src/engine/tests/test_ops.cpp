// The CPU operators against hand-computed values, the thread pool, the task graph and the TTFT breakdown.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "attention.h"
#include "check.h"  // edgeflow_runtime/tests/check.h
#include "exp_approx.h"
#include "engine.h"
#include "executor.h"
#include "ops.h"

using namespace edgeflow;

static bool near(float a, float b, float tol = 1e-5f) { return std::fabs(a - b) <= tol * (1.f + std::fabs(b)); }

static void test_quantize() {
    // Round half to even, clamp to [-127, 127], NaN to -127 (never an undefined cast).
    const float x[] = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 126.5f, 300.f, -300.f, NAN, 0.49f, -127.5f};
    const float m[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    const int8_t want[] = {0, 2, 2, 0, -2, -2, 126, 127, -127, -127, 0, -127};
    int8_t got[12];
    quantize_rows(1, 12, x, m, got);
    for (int i = 0; i < 12; ++i) CHECK(got[i] == want[i]);
    // The multiplier is applied per input feature.
    const float x2[] = {1.f, 1.f, 1.f, 1.f};
    const float m2[] = {2.f, 0.25f, 10.4f, -3.6f};
    int8_t q2[4];
    quantize_rows(1, 4, x2, m2, q2);
    CHECK(q2[0] == 2 && q2[1] == 0 && q2[2] == 10 && q2[3] == -4);
}

static void test_norm_rope_attention() {
    const float x[] = {1.f, 2.f, 3.f, 4.f}, w[] = {1.f, 1.f, 2.f, 0.5f};
    float y[4];
    rmsnorm_rows(1, 4, x, w, 0.f, y);
    const float r = 1.f / std::sqrt((1 + 4 + 9 + 16) / 4.f);
    CHECK(near(y[0], r) && near(y[1], 2 * r) && near(y[2], 6 * r) && near(y[3], 2 * r));

    // RoPE at position 0 is the identity; at position p the first pair rotates by p * inv_freq[0] = p radians.
    const int d = 4;
    std::vector<float> cs(3 * d / 2), sn(3 * d / 2);
    rope_tables(3, d, 10000.f, cs.data(), sn.data());
    float v[4] = {1.f, 0.5f, 0.f, 2.f};
    rope_rows(1, 1, d, 0, cs.data(), sn.data(), v);
    CHECK(near(v[0], 1.f) && near(v[1], 0.5f) && near(v[2], 0.f) && near(v[3], 2.f));
    float u[4] = {1.f, 0.f, 0.f, 0.f};
    rope_rows(1, 1, d, 2, cs.data(), sn.data(), u);  // pair (u[0], u[2]) rotated by 2 rad
    CHECK(near(u[0], std::cos(2.f)) && near(u[2], std::sin(2.f)));

    // Attention: the first token sees only itself; a later one averages by softmax weights.
    const float q[] = {1.f, 0.f, 1.f, 0.f};  // two query rows of d = 2
    const float k[] = {1.f, 0.f, 0.f, 0.f};  // keys of positions 0 and 1
    const float vv[] = {3.f, 5.f, 7.f, 9.f};
    float out[4], scratch[2];
    attention_ref(2, 0, 2, q, 2, k, vv, 2, out, scratch);
    CHECK(near(out[0], 3.f) && near(out[1], 5.f));
    const float s0 = 1.f / std::sqrt(2.f), p0 = std::exp(s0) / (std::exp(s0) + 1.f);
    CHECK(near(out[2], p0 * 3 + (1 - p0) * 7) && near(out[3], p0 * 5 + (1 - p0) * 9));
}

static void test_embed_head_silu() {
    const int8_t codes[] = {1, -2, 3, 127, -128, 0};  // V = 2 rows of H = 3
    const float ws[] = {0.5f, 2.f};
    const int8_t* rows[] = {codes + 3, codes};  // tokens 1, 0
    const float row_scales[] = {ws[1], ws[0]};
    float x[6];
    embed_rows(2, 3, rows, row_scales, x);
    CHECK(x[0] == 254.f && x[1] == -256.f && x[2] == 0.f && x[3] == 0.5f);
    const float h[] = {1.f, 1.f, 1.f};
    float logits[2];
    lm_head_rows(1, 3, 2, 0, 2, h, codes, ws, logits);
    CHECK(near(logits[0], 1.f) && near(logits[1], -2.f));
    float g[] = {0.f, 2.f}, up[] = {3.f, 0.5f};
    silu_mul(2, g, up);
    CHECK(near(g[0], 0.f) && near(g[1], 2.f / (1.f + std::exp(-2.f)) * 0.5f));
}

// The dispatched LM head (AVX-512 or AVX2 where the CPU has it) against the portable one and a double-precision sum,
// on the default model's H with a tail (H % 16 != 0), a vocabulary range with a row tail, and 6 rows of h (a block of
// four and two more); and each row's logits the same bits whether computed alone (decode's path) or with the others
// (prefix-shared scoring relies on it).
static void test_lm_head_kernels() {
    const auto kernels = lm_head_kernels();  // every kernel this CPU can run, each on its own (not only the chosen)
    CHECK(lm_head_kernel().fn == kernels.back().fn || std::getenv("EDGEFLOW_LM_HEAD"));
    for (const auto& kernel : kernels)
        for (int H : {576, 83}) {
            const int V = 37, T = 6, v0 = 2, v1 = 35;
            std::vector<int8_t> codes(size_t(V) * H);
            std::vector<float> h(size_t(T) * H), ws(V);
            for (size_t i = 0; i < codes.size(); ++i) codes[i] = int8_t(int((i * 2654435761u) >> 24) - 128);
            for (size_t i = 0; i < h.size(); ++i) h[i] = std::sin(float(i)) * 3.f;
            for (int v = 0; v < V; ++v) ws[v] = 0.01f * (v + 1);
            std::vector<float> got(size_t(T) * V, -1.f);
            kernel.fn(T, H, V, v0, v1, h.data(), codes.data(), ws.data(), got.data());
            bool ok = true;
            for (int t = 0; t < T; ++t)
                for (int v = 0; v < V; ++v) {
                    const size_t o = size_t(t) * V + v;
                    if (v < v0 || v >= v1) {
                        ok &= got[o] == -1.f;  // columns outside [v0, v1) untouched
                        continue;
                    }
                    double want = 0, mag = 0;
                    for (int k = 0; k < H; ++k) {
                        want += double(h[size_t(t) * H + k]) * codes[size_t(v) * H + k];
                        mag += std::fabs(double(h[size_t(t) * H + k]) * codes[size_t(v) * H + k]);
                    }
                    ok &= std::fabs(got[o] - want * ws[v]) <= 1e-6 * mag * ws[v];
                }
            if (!ok) std::fprintf(stderr, "lm head kernel %s, H=%d: wrong logits\n", kernel.name, H);
            CHECK(ok);
            for (int t = 0; t < T; ++t) {  // a row alone (decode) gives the same bits as with the others
                std::vector<float> alone(V, -1.f);
                kernel.fn(1, H, V, v0, v1, h.data() + size_t(t) * H, codes.data(), ws.data(), alone.data());
                CHECK(std::equal(alone.begin() + v0, alone.begin() + v1, got.begin() + size_t(t) * V + v0));
            }
        }
}

static void test_pool_and_graph() {
    ThreadPool pool(3);
    std::vector<int> hit(100, 0);
    pool.parallel_for(100, [&](int i) { hit[i] += 1; });
    bool all_once = true;
    for (int h : hit) all_once &= h == 1;
    CHECK(all_once);

    // A diamond a -> (b on accel, c on cpu) -> d: d runs last, after both.
    Trace trace;
    Executors ex(2, 1, &trace);
    Executor* lanes[kNumLanes];
    ex.lanes(lanes);
    std::atomic<int> order{0};
    int ra = -1, rb = -1, rc = -1, rd = -1;
    TaskGraph g;
    Task* a = g.add("a", 0, 0, Lane::IO, 0, [&] { ra = order++; });
    Task* b = g.add("b", 0, 0, Lane::Accel, 0, [&] { rb = order++; });
    Task* c = g.add("c", 0, 0, Lane::CPU, 0, [&] { rc = order++; });
    Task* d = g.add("d", 0, 0, Lane::CPU, 0, [&] { rd = order++; });
    TaskGraph::depend(a, b);
    TaskGraph::depend(a, c);
    TaskGraph::depend(b, d);
    TaskGraph::depend(c, d);
    g.run(lanes);
    CHECK(ra == 0 && rd == 3 && rb > 0 && rc > 0);
    CHECK(trace.events().size() == 4);

    // An error in a task surfaces from run(); its successors do not run.
    TaskGraph g2;
    bool ran_after = false;
    Task* e = g2.add("fails", 0, 0, Lane::CPU, 0, [] { throw EngineError("boom in task"); });
    Task* f = g2.add("after", 0, 0, Lane::Accel, 0, [&] { ran_after = true; });
    TaskGraph::depend(e, f);
    CHECK_THROWS(std::exception, "boom in task", g2.run(lanes));
    CHECK(!ran_after);

    // Breakdown: compute over io over unpack; the parts add up to the wall time.
    std::vector<TraceEvent> evs = {{"load", "io-0", "io", 0, -1, 0.0, 0.4},
                                   {"unpack", "unpack-0", "unpack", 0, -1, 0.3, 0.5},
                                   {"qkv", "accel-0", "accel", 0, 0, 0.45, 0.8}};
    const auto bd = breakdown(evs, 0.0, 1.0);
    CHECK(near(bd.io_s, 0.4f) && near(bd.unpack_s, 0.05f) && near(bd.compute_s, 0.35f) && near(bd.idle_s, 0.2f));
}

// dequantize_rope_rows is dequantize_rows followed by rope_rows in one pass: bit-identical, any head count.
static void test_dequantize_rope_fused() {
    const int T = 5, heads = 3, d = 64, C = heads * d, pos0 = 11, ld = C + 8;
    std::vector<float> cs(size_t(pos0 + T) * d / 2), sn(cs.size());
    rope_tables(pos0 + T, d, 100000.f, cs.data(), sn.data());
    std::mt19937 rng(5);
    std::uniform_int_distribution<int32_t> acc_d(-3000000, 3000000);
    std::uniform_real_distribution<float> sc_d(1e-6f, 1e-3f);
    std::vector<int32_t> acc(size_t(T) * ld);
    std::vector<float> scale(C), two(size_t(T) * C), one(size_t(T) * C);
    for (auto& a : acc) a = acc_d(rng);
    for (auto& x : scale) x = sc_d(rng);
    dequantize_rows(T, C, acc.data(), ld, scale.data(), two.data());
    rope_rows(T, heads, d, pos0, cs.data(), sn.data(), two.data());
    dequantize_rope_rows(T, heads, d, pos0, acc.data(), ld, scale.data(), cs.data(), sn.data(), one.data());
    CHECK(one == two);
}

// silu_mul's 16-lane body (vexp_approx) against the scalar formula with exp_approx, on a length with a tail and
// inputs over the whole clamp range: the same polynomial, so equal up to FMA contraction (a few ulps).
static void test_silu_vector() {
    const int n = 16 * 37 + 11;
    std::vector<float> g(n), u(n), want(n);
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> wide(-100.f, 100.f), unit(-2.f, 2.f);
    for (int i = 0; i < n; ++i) {
        g[i] = i % 3 ? unit(rng) * 4.f : wide(rng);
        u[i] = unit(rng);
        want[i] = g[i] / (1.f + exp_approx(-g[i])) * u[i];
    }
    silu_mul(n, g.data(), u.data());
    bool ok = true;
    for (int i = 0; i < n; ++i) ok &= std::fabs(g[i] - want[i]) <= 4e-7f * std::fabs(want[i]) + 1e-30f;
    CHECK(ok);
    CHECK(near(exp_approx(1.f), std::exp(1.f), 2e-7f) && near(exp_approx(-20.5f), std::exp(-20.5f), 2e-7f));
}

// swiglu_quantize_rows is the four passes it replaces, bit for bit (including round half to even at the end).
static void test_swiglu_fused() {
    const int T = 6, I = 200, ld = I + 4;
    std::mt19937 rng(9);
    std::uniform_int_distribution<int32_t> acc_d(-400000, 400000);
    std::uniform_real_distribution<float> sc_d(1e-6f, 4e-5f), m_d(5.f, 40.f);
    std::vector<int32_t> ag(size_t(T) * ld), au(size_t(T) * ld);
    std::vector<float> sg(I), su(I), m(I), g(size_t(T) * I), u(size_t(T) * I), scratch(2 * I);
    for (auto& a : ag) a = acc_d(rng);
    for (auto& a : au) a = acc_d(rng);
    for (int i = 0; i < I; ++i) sg[i] = sc_d(rng), su[i] = sc_d(rng), m[i] = m_d(rng);
    std::vector<int8_t> want(size_t(T) * I), got(size_t(T) * I);
    dequantize_rows(T, I, ag.data(), ld, sg.data(), g.data());
    dequantize_rows(T, I, au.data(), ld, su.data(), u.data());
    silu_mul(T * I, g.data(), u.data());
    quantize_rows(T, I, g.data(), m.data(), want.data());
    swiglu_quantize_rows(T, I, ag.data(), au.data(), ld, sg.data(), su.data(), m.data(), got.data(), scratch.data());
    CHECK(got == want);
    int nonzero = 0;
    for (int8_t x : got) nonzero += x != 0;
    CHECK(nonzero > T * I / 2);  // the fixture exercises the quantizer, not just zeros
}

// The tiled kernels against attention_ref. Both compute every score as (q . k) * scale and exp with the same
// polynomial; they differ in summation order (vector lanes, key tiles, the online softmax's rescaling) and in
// normalising at the end (O / l) rather than per term (p / l). Each output is a convex combination of values, so the
// error is bounded relative to max |v|: we require |tiled - ref| <= 2e-5 * max|v| (a few float32 ulps of the
// softmax weights times the key count's rounding growth); measured on these cases: about 1e-6 (printed).
static void test_attention_tiled() {
    struct Case {
        int T, pos0, d, n_kv, group;
    };
    const Case cases[] = {
        {1, 0, 64, 3, 3},    {1, 200, 64, 3, 3},  {37, 0, 64, 3, 3},   {128, 64, 64, 3, 3}, {61, 130, 64, 3, 3},
        {33, 7, 32, 2, 4},   {70, 65, 80, 2, 1},  {19, 40, 128, 1, 4}, {23, 9, 40, 2, 3},   {5, 3, 24, 4, 1},
        {130, 0, 64, 1, 1},  {3, 64, 64, 3, 3},   {1, 77, 128, 1, 4},  {1, 5, 64, 2, 1},   {1, 300, 40, 2, 3},
        // decode long enough for a kernel that splits keys to cut each KV head into parts (attention_plan)
        {1, 1087, 64, 3, 3}, {1, 700, 128, 1, 4}, {1, 511, 64, 3, 3}, {1, 2000, 40, 2, 3},
    };
    std::mt19937 rng(11);
    std::normal_distribution<float> nd(0.f, 1.f);
    double worst = 0;
    auto kernels = attention_kernels();  // every prefill and decode kernel this CPU can run, on every case
    for (const auto& k : decode_attention_kernels()) kernels.push_back(k);
    for (const auto& kernel : kernels) {
        for (const auto& c : cases) {
            const int H = c.n_kv * c.group, qd = H * c.d, kvd = c.n_kv * c.d, n = c.pos0 + c.T;
            // Strides wider than the data, as in a real KV cache slice of a larger model.
            const int q_stride = qd + 3, kv_stride = kvd + 5;
            std::vector<float> q(size_t(c.T) * q_stride), k(size_t(n) * kv_stride), v(size_t(n) * kv_stride);
            for (auto& x : q) x = 2.f * nd(rng);  // scores of a few units: a peaked softmax
            for (auto& x : k) x = nd(rng);
            for (auto& x : v) x = nd(rng);
            float vmax = 0;
            for (float x : v) vmax = std::max(vmax, std::fabs(x));
            AttentionArgs a;
            a.T = c.T;
            a.pos0 = c.pos0;
            a.d = c.d;
            a.n_heads = H;
            a.n_kv_heads = c.n_kv;
            a.q = q.data();
            a.q_stride = q_stride;
            a.k = k.data();
            a.v = v.data();
            a.kv_stride = kv_stride;
            a.out_stride = q_stride;
            std::vector<float> want(q.size(), 0.f), got(q.size(), 0.f), got_pool(q.size(), 0.f);
            a.out = want.data();
            attention_ref_all(a);
            a.out = got.data();
            attention_tiled_all(kernel, a);
            // The same plan run on a pool: items are independent, so the threads never change a result.
            std::vector<float> got_seq(q.size(), 0.f);
            a.out = got_seq.data();
            attention_tiled_all(kernel, a, 2);
            a.out = got_pool.data();
            ThreadPool pool(2);
            attention_run(kernel, a, 2, [&](int n, const auto& fn) { pool.parallel_for(n, fn); });
            double err = 0;
            for (int t = 0; t < c.T; ++t)
                for (int i = 0; i < qd; ++i) {
                    const size_t o = size_t(t) * q_stride + i;
                    err = std::max({err, double(std::fabs(got[o] - want[o])), double(std::fabs(got_seq[o] - want[o]))});
                }
            worst = std::max(worst, err / vmax);
            if (!(err <= 2e-5 * vmax))
                std::fprintf(stderr, "attention %s T=%d pos0=%d d=%d kv=%d group=%d: max error %.3g (max |v| %.3g)\n",
                             kernel.name, c.T, c.pos0, c.d, c.n_kv, c.group, err, vmax);
            CHECK(err <= 2e-5 * vmax);
            CHECK(got_pool == got_seq);
            // The fused quantization for o_proj equals quantize_rows over the finished output.
            std::vector<float> mult(qd);
            for (int i = 0; i < qd; ++i) mult[i] = 20.f + float(i % 7);
            std::vector<int8_t> q8(size_t(c.T) * qd), q8_want(size_t(c.T) * qd);
            a.out_q = q8.data();
            a.out_m = mult.data();
            a.out_q_stride = qd;
            attention_tiled_all(kernel, a, 2);
            a.out_q = nullptr;
            for (int t = 0; t < c.T; ++t)
                quantize_rows(1, qd, got_pool.data() + size_t(t) * q_stride, mult.data(), q8_want.data() + size_t(t) * qd);
            CHECK(q8 == q8_want);
            // The padding columns between rows are never written.
            bool pad_untouched = true;
            for (int t = 0; t < c.T; ++t)
                for (int i = qd; i < q_stride; ++i) pad_untouched &= got[size_t(t) * q_stride + i] == 0.f;
            CHECK(pad_untouched);
        }
    }
    std::printf("tiled attention vs attention_ref: worst max|diff| / max|v| = %.2e\n", worst);
}

// The work plan covers every (query head, query row) exactly once for any pool size, heads of an item share one KV
// head, and items come largest first.
static void test_attention_plan() {
    for (int threads : {1, 2, 3, 8, 64})
        for (int T : {1, 2, 17, 128, 960})
            for (int group : {1, 3, 4}) {
                AttentionArgs a;
                a.T = T;
                a.pos0 = 100;
                a.d = 64;
                a.n_kv_heads = 3;
                a.n_heads = 3 * group;
                const auto items = attention_plan(a, threads);
                std::vector<int> hit(size_t(T) * a.n_heads, 0);
                bool ok = true;
                double prev = 1e300;
                for (const auto& it : items) {
                    ok &= it.h0 >= it.kv_head * group && it.h1 <= (it.kv_head + 1) * group && it.h0 < it.h1;
                    ok &= 0 <= it.t0 && it.t0 < it.t1 && it.t1 <= T;
                    const double w = double(it.h1 - it.h0) * (it.t1 - it.t0) * (a.pos0 + it.t1);
                    ok &= w <= prev;
                    prev = w;
                    for (int h = it.h0; h < it.h1; ++h)
                        for (int t = it.t0; t < it.t1; ++t) hit[size_t(t) * a.n_heads + h] += 1;
                }
                for (int x : hit) ok &= x == 1;
                // Enough pieces to balance: 2 per thread, or the finest split (one head, 8 rows) when that is fewer;
                // at T = 1 (decode) one item per KV head, its query heads stacked as the kernel's rows.
                if (T == 1) ok &= int(items.size()) == a.n_kv_heads && items[0].h1 - items[0].h0 == group;
                else ok &= int(items.size()) >= std::min(2 * threads, a.n_heads * ((T + 7) / 8));
                CHECK(ok);
            }
    // Split decode plans: each KV head's keys cut into contiguous parts that cover [0, pos0 + 1) once, none shorter
    // than kMinKeysPerPart, enough items for 2 per thread where the keys allow; short contexts stay unsplit.
    for (int threads : {1, 2, 4, 8})
        for (int pos0 : {0, 100, 511, 1087, 4095})
            for (int kv : {1, 3, 8}) {
                AttentionArgs a;
                a.T = 1;
                a.pos0 = pos0;
                a.d = 64;
                a.n_kv_heads = kv;
                a.n_heads = 3 * kv;
                const auto items = attention_plan(a, threads, true);
                const int n = pos0 + 1;
                bool ok = true;
                std::vector<int> covered(size_t(kv) * n, 0);
                for (const auto& it : items) {
                    const int j0 = it.part < 0 ? 0 : it.j0, j1 = it.part < 0 ? n : it.j1;
                    ok &= it.h0 == it.kv_head * 3 && it.h1 == it.h0 + 3 && it.t0 == 0 && it.t1 == 1;
                    ok &= it.part < 0 || j1 - j0 >= kMinKeysPerPart;
                    for (int j = j0; j < j1; ++j) covered[size_t(it.kv_head) * n + j] += 1;
                }
                for (int x : covered) ok &= x == 1;
                const int parts = int(items.size()) / kv;
                ok &= parts == 1 ? items[0].part < 0 : items[0].part == 0;
                ok &= int(items.size()) >= std::min(2 * threads, kv * std::max(1, n / kMinKeysPerPart));
                ok &= attention_parts_size(a, items) == (parts > 1 ? size_t(kv) * parts * 3 * 66 : 0);
                if (!ok) std::fprintf(stderr, "split plan: threads %d pos0 %d kv %d -> %zu items\n", threads, pos0, kv,
                                      items.size());
                CHECK(ok);
            }
    AttentionArgs bad;
    bad.T = 4;
    bad.d = 64;
    bad.n_heads = 9;
    bad.n_kv_heads = 2;
    CHECK_THROWS(std::exception, "bad shape", attention_plan(bad, 2));
}

int main() {
    test_quantize();
    test_norm_rope_attention();
    test_dequantize_rope_fused();
    test_silu_vector();
    test_swiglu_fused();
    test_attention_tiled();
    test_attention_plan();
    test_lm_head_kernels();
    test_embed_head_silu();
    test_pool_and_graph();
    if (g_failures) std::fprintf(stderr, "%d check(s) failed\n", g_failures);
    return g_failures ? 1 : 0;
}
