// A tiny random Llama-shaped model in memory (2 layers, hidden 64, vocab 50) for the engine's tests.
#pragma once
#include <cmath>
#include <random>
#include <vector>

#include "model.h"

namespace edgeflow {

inline Model tiny_model(unsigned seed) {
    Model m;
    LlamaConfig& c = m.cfg;
    c.hidden = 64;
    c.intermediate = 96;
    c.n_layers = 2;
    c.n_heads = 4;
    c.n_kv_heads = 2;
    c.head_dim = 16;
    c.vocab = 50;
    c.max_positions = 64;
    c.rope_theta = 10000.f;
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> code(-8, 7);
    std::uniform_real_distribution<float> uni(0.5f, 1.5f);
    auto table = [&](RowTable& t) {
        t.rows = c.vocab;
        t.cols = c.hidden;
        std::vector<int8_t> codes(size_t(t.rows) * t.cols);
        for (auto& x : codes) x = int8_t(code(rng) * 16);
        std::vector<float> scales(t.rows);
        for (auto& s : scales) s = 0.01f * uni(rng);
        t.codes = SharedArray<int8_t>::copy_of(codes.data(), codes.size());
        t.w_scale = SharedArray<float>::copy_of(scales.data(), scales.size());
    };
    auto linear = [&](QLinear& q, int C, int K) {
        q.C = C;
        q.K = K;
        q.codes.resize(size_t(C) * K);
        for (auto& x : q.codes) x = int8_t(code(rng));
        std::vector<float> ws(C), is(K);
        for (auto& s : ws) s = 0.3f / std::sqrt(float(K)) * uni(rng);
        for (auto& s : is) s = uni(rng);
        q.set_scales(ws.data(), is.data(), 0.03f * uni(rng));
    };
    table(m.embed);
    m.final_norm.assign(c.hidden, 1.f);
    m.layers.resize(c.n_layers);
    for (auto& L : m.layers) {
        L.attn_norm.resize(c.hidden);
        L.ffn_norm.resize(c.hidden);
        for (auto& w : L.attn_norm) w = uni(rng);
        for (auto& w : L.ffn_norm) w = uni(rng);
        linear(L.q, c.q_dim(), c.hidden);
        linear(L.k, c.kv_dim(), c.hidden);
        linear(L.v, c.kv_dim(), c.hidden);
        linear(L.o, c.hidden, c.q_dim());
        linear(L.gate, c.intermediate, c.hidden);
        linear(L.up, c.intermediate, c.hidden);
        linear(L.down, c.hidden, c.intermediate);
    }
    return m;
}

}  // namespace edgeflow
