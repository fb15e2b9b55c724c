// Figure 3 on a CPU: a matmul whose weights are kept in an importance-aware format and dequantized into INT8 on
// every call, against the same matmul on static per-channel INT8 weights - for `make bench-dequant` (Figure 3).
//
//   edgeflow-bench-dequant [--tokens T] [--shape CxK ...] [--group G] [--reps N]     (one JSON object on stdout)
//
// Per shape (C output channels, K input channels; T tokens of int8 activations), one thread, median of N calls:
//   opt_int8  our best INT8 kernel for this CPU (gemm.h dispatch) on static per-channel INT8 codes
//   int8      the same codes through the portable kernel (gemm_s8_ref): the INT8 operator without the ISA-specific
//             optimisation (the paper's "INT8" is the NPU operator without QNN's static layout optimisation)
//   awq       AWQ's format - asymmetric 4-bit codes per group of G input channels (two per byte), a scale and zero
//             point per (channel, group) - dequantized into per-channel INT8 codes, then the best kernel
//   cmpq      CMPQ's format - non-uniform codes of 2, 3 or 4 bits chosen per input channel (3 on average, one per
//             byte), a codebook per input channel - dequantized into per-channel INT8 codes, then the best kernel
// The per-channel INT8 scales of awq and cmpq are computed offline (static metadata); what runs per call is the
// "extra arithmetic" of the paper: unpack, codebook or (q - z) * s, rescale, round, clamp. Each dequantization is
// checked once against a double-precision reference (every code within 1 of it) before timing.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "gemm.h"

using namespace edgeflow;

namespace {

double seconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

template <typename F>
double median_s(int reps, F&& f) {
    std::vector<double> t;
    for (int r = 0; r < reps; ++r) {
        const double t0 = seconds();
        f();
        t.push_back(seconds() - t0);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

// Round half away from zero and clamp, written so that the compiler vectorizes the dequantization loops (a
// float -> int conversion with truncation); the loops are cloned for AVX2 where the CPU has it.
inline int8_t to_int8(float v) {
    const float r = std::max(-127.0f, std::min(127.0f, v + (v >= 0.0f ? 0.5f : -0.5f)));
    return int8_t(int(r));
}

#if defined(__x86_64__) && defined(__GNUC__)
#define EF_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define EF_VECTOR_CLONES
#endif

struct Awq {  // [C, K/2] packed nibbles (even k low), scale/zero [C, K/G], per-channel INT8 scale [C]
    std::vector<uint8_t> packed;
    std::vector<float> scale, zero, inv_out;
};

struct Cmpq {  // codes [C, K] (one per byte, < 2^bits[k]), codebook [K, 16], per-channel INT8 scale [C]
    std::vector<uint8_t> codes, bits;
    std::vector<float> book, inv_out;
};

// w [C, K] -> AWQ: per (c, group) min/max over the group -> 15 steps, zero = round(-min / scale).
Awq make_awq(const std::vector<float>& w, int C, int K, int G) {
    Awq a;
    const int groups = K / G;
    a.packed.assign(size_t(C) * K / 2, 0);
    a.scale.resize(size_t(C) * groups), a.zero.resize(size_t(C) * groups), a.inv_out.resize(C);
    for (int c = 0; c < C; ++c) {
        float peak = 0;
        for (int g = 0; g < groups; ++g) {
            const float* row = &w[size_t(c) * K + size_t(g) * G];
            const float lo = *std::min_element(row, row + G), hi = *std::max_element(row, row + G);
            const float s = std::max(hi - lo, 1e-8f) / 15.0f, z = std::nearbyint(-lo / s);
            a.scale[size_t(c) * groups + g] = s, a.zero[size_t(c) * groups + g] = z;
            for (int i = 0; i < G; ++i) {
                const int q = int(std::max(0.0f, std::min(15.0f, std::nearbyint(row[i] / s + z))));
                const size_t k = size_t(g) * G + i;
                a.packed[(size_t(c) * K + k) / 2] |= uint8_t(q << (4 * (k & 1)));
                peak = std::max(peak, std::fabs((q - z) * s));
            }
        }
        a.inv_out[c] = peak > 0 ? 127.0f / peak : 0.0f;
    }
    return a;
}

EF_VECTOR_CLONES void dequant_awq(const Awq& a, int C, int K, int G, int8_t* out) {
    const int groups = K / G;
    for (int c = 0; c < C; ++c) {
        const uint8_t* p = &a.packed[size_t(c) * K / 2];
        int8_t* o = out + size_t(c) * K;
        for (int g = 0; g < groups; ++g) {
            const float s = a.scale[size_t(c) * groups + g] * a.inv_out[c], z = a.zero[size_t(c) * groups + g];
            const uint8_t* bytes = p + size_t(g) * G / 2;
            int8_t* og = o + size_t(g) * G;
            for (int i = 0; i < G / 2; ++i) {
                og[2 * i] = to_int8((float(bytes[i] & 15) - z) * s);
                og[2 * i + 1] = to_int8((float(bytes[i] >> 4) - z) * s);
            }
        }
    }
}

// w [C, K] -> CMPQ-like: bits per input channel 2/3/4 (a quarter, half, quarter: 3 on average), a codebook of
// 2^bits levels per input channel at the quantiles of its column, each weight coded to its nearest level.
Cmpq make_cmpq(const std::vector<float>& w, int C, int K, std::mt19937& rng) {
    Cmpq m;
    m.codes.resize(size_t(C) * K), m.bits.resize(K), m.book.assign(size_t(K) * 16, 0.0f), m.inv_out.resize(C);
    std::vector<float> col(C);
    for (int k = 0; k < K; ++k) {
        const unsigned r = rng() % 4;
        m.bits[k] = uint8_t(r == 0 ? 2 : r == 3 ? 4 : 3);
        const int levels = 1 << m.bits[k];
        for (int c = 0; c < C; ++c) col[c] = w[size_t(c) * K + k];
        std::sort(col.begin(), col.end());
        for (int l = 0; l < levels; ++l) m.book[size_t(k) * 16 + l] = col[size_t((l + 0.5) * C / levels)];
    }
    for (int c = 0; c < C; ++c) {
        float peak = 0;
        for (int k = 0; k < K; ++k) {
            const float v = w[size_t(c) * K + k];
            const float* book = &m.book[size_t(k) * 16];
            int best = 0;
            for (int l = 1; l < (1 << m.bits[k]); ++l)
                if (std::fabs(book[l] - v) < std::fabs(book[best] - v)) best = l;
            m.codes[size_t(c) * K + k] = uint8_t(best);
            peak = std::max(peak, std::fabs(book[best]));
        }
        m.inv_out[c] = peak > 0 ? 127.0f / peak : 0.0f;
    }
    return m;
}

EF_VECTOR_CLONES void dequant_cmpq(const Cmpq& m, int C, int K, int8_t* out) {
    for (int c = 0; c < C; ++c) {
        const uint8_t* q = &m.codes[size_t(c) * K];
        const float inv = m.inv_out[c];
        int8_t* o = out + size_t(c) * K;
        for (int k = 0; k < K; ++k) o[k] = to_int8(m.book[size_t(k) * 16 + q[k]] * inv);
    }
}

// Every dequantized code within 1 of the double-precision value it stands for (rounding may differ at .5).
template <typename F>
void check(const char* what, const std::vector<int8_t>& got, int C, int K, F&& reference) {
    for (int c = 0; c < C; ++c)
        for (int k = 0; k < K; ++k) {
            const double want = std::max(-127.0, std::min(127.0, reference(c, k)));
            if (std::fabs(got[size_t(c) * K + k] - want) > 1.0) {
                std::fprintf(stderr, "%s dequantization wrong at [%d, %d]: %d, expected %.3f\n", what, c, k,
                             got[size_t(c) * K + k], want);
                std::exit(1);
            }
        }
}

}  // namespace

int main(int argc, char** argv) {
    int T = 128, G = 128, reps = 5;
    std::vector<std::pair<int, int>> shapes;
    for (int i = 1; i < argc; ++i) {
        const std::string f = argv[i];
        const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
        int c = 0, k = 0;
        if (f == "--tokens" && v) T = std::atoi(argv[++i]);
        else if (f == "--group" && v) G = std::atoi(argv[++i]);
        else if (f == "--reps" && v) reps = std::atoi(argv[++i]);
        else if (f == "--shape" && v && std::sscanf(argv[++i], "%dx%d", &c, &k) == 2) shapes.emplace_back(c, k);
        else {
            std::fprintf(stderr, "usage: %s [--tokens T] [--shape CxK ...] [--group G] [--reps N]\n", argv[0]);
            return 2;
        }
    }
    if (shapes.empty()) shapes = {{4096, 4096}, {14336, 4096}};  // Llama3-8B: q/o projection, gate/up projection
    for (auto [c, k] : shapes)
        if (T < 1 || G < 2 || G % 2 || reps < 1 || c < 1 || k < G || k % G) {
            std::fprintf(stderr, "need T, reps >= 1, an even group G >= 2 and K a multiple of G (shape %dx%d)\n", c, k);
            return 2;
        }
    const GemmKernel& best = best_gemm_kernel();
    std::mt19937 rng(7);
    std::printf("{\"kernel\": \"%s\", \"tokens\": %d, \"group\": %d, \"reps\": %d, \"threads\": 1, \"shapes\": [",
                best.name, T, G, reps);
    for (size_t s = 0; s < shapes.size(); ++s) {
        const auto [C, K] = shapes[s];
        std::normal_distribution<float> normal(0.0f, 0.02f);
        std::vector<float> w(size_t(C) * K);
        for (auto& x : w) x = normal(rng);
        for (int k = 0; k < K; k += 97)  // a few outlier input channels, as real layers have
            for (int c = 0; c < C; ++c) w[size_t(c) * K + k] *= 8.0f;
        std::vector<int8_t> a(size_t(T) * K), codes(size_t(C) * K), scratch(size_t(C) * K);
        for (auto& x : a) x = int8_t(int(rng() % 255) - 127);
        for (int c = 0; c < C; ++c) {  // static per-channel symmetric INT8
            float peak = 0;
            for (int k = 0; k < K; ++k) peak = std::max(peak, std::fabs(w[size_t(c) * K + k]));
            for (int k = 0; k < K; ++k) codes[size_t(c) * K + k] = to_int8(w[size_t(c) * K + k] * 127.0f / peak);
        }
        const Awq awq = make_awq(w, C, K, G);
        const Cmpq cmpq = make_cmpq(w, C, K, rng);
        dequant_awq(awq, C, K, G, scratch.data());
        check("awq", scratch, C, K, [&](int c, int k) {
            const size_t gi = size_t(c) * (K / G) + k / G;
            const int q = (awq.packed[(size_t(c) * K + k) / 2] >> (4 * (k & 1))) & 15;
            return (q - double(awq.zero[gi])) * awq.scale[gi] * awq.inv_out[c];
        });
        dequant_cmpq(cmpq, C, K, scratch.data());
        check("cmpq", scratch, C, K, [&](int c, int k) {
            return double(cmpq.book[size_t(k) * 16 + cmpq.codes[size_t(c) * K + k]]) * cmpq.inv_out[c];
        });
        std::vector<int32_t> y(size_t(T) * C), y_ref(size_t(T) * C);
        best.fn(T, C, K, a.data(), K, codes.data(), K, y.data(), C);
        gemm_s8_ref(T, C, K, a.data(), K, codes.data(), K, y_ref.data(), C);
        if (y != y_ref) {
            std::fprintf(stderr, "kernel %s differs from the reference on %dx%d\n", best.name, C, K);
            return 1;
        }
        const double opt = median_s(reps, [&] { best.fn(T, C, K, a.data(), K, codes.data(), K, y.data(), C); });
        const double plain = median_s(reps, [&] { gemm_s8_ref(T, C, K, a.data(), K, codes.data(), K, y.data(), C); });
        const double awq_dq = median_s(reps, [&] { dequant_awq(awq, C, K, G, scratch.data()); });
        const double awq_all = median_s(reps, [&] {
            dequant_awq(awq, C, K, G, scratch.data());
            best.fn(T, C, K, a.data(), K, scratch.data(), K, y.data(), C);
        });
        const double cmpq_dq = median_s(reps, [&] { dequant_cmpq(cmpq, C, K, scratch.data()); });
        const double cmpq_all = median_s(reps, [&] {
            dequant_cmpq(cmpq, C, K, scratch.data());
            best.fn(T, C, K, a.data(), K, scratch.data(), K, y.data(), C);
        });
        double avg_bits = 0;
        for (int k = 0; k < K; ++k) avg_bits += cmpq.bits[k];
        std::printf("%s{\"C\": %d, \"K\": %d, \"opt_int8_s\": %.6f, \"int8_s\": %.6f, \"awq_s\": %.6f, "
                    "\"awq_dequant_s\": %.6f, \"cmpq_s\": %.6f, \"cmpq_dequant_s\": %.6f, \"cmpq_avg_bits\": %.3f}",
                    s ? ", " : "", C, K, opt, plain, awq_all, awq_dq, cmpq_all, cmpq_dq, avg_bits / K);
        std::fflush(stdout);
    }
    std::printf("]}\n");
    return 0;
}
