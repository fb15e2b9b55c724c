#include "model.h"

#include <cmath>

namespace edgeflow {
namespace {

void expect(bool ok, const std::string& what) {
    if (!ok) throw EngineError(what);
}

}  // namespace

void LlamaConfig::validate() const {
    expect(hidden > 0 && intermediate > 0 && n_layers > 0 && n_heads > 0 && n_kv_heads > 0 && head_dim > 0 &&
               vocab > 0,
           "model config: sizes must be positive");
    expect(head_dim % 2 == 0, "model config: head_dim must be even for rotate-half RoPE");
    expect(n_heads % n_kv_heads == 0, "model config: num_attention_heads must be a multiple of num_key_value_heads");
    expect(max_positions > 0, "model config: max_position_embeddings must be positive");
    expect(rms_eps > 0 && std::isfinite(rope_theta) && rope_theta > 0, "model config: bad rms_norm_eps or rope_theta");
    // The accumulator bound of gemm.h: K * 127 * 128 < 2^31.
    expect(hidden < (1 << 17) && intermediate < (1 << 17) && q_dim() < (1 << 17),
           "model config: an input dimension is too large for int32 accumulation");
}

void QLinear::set_scales(const float* w_scale, const float* in_scale, float act_scale, const float* out_step,
                         int bits) {
    if (!(act_scale > 0) || !std::isfinite(act_scale)) throw EngineError("act_scale must be a positive number");
    if (bits != 8 && bits != 16) throw EngineError("act_bits must be 8 or 16, got " + std::to_string(bits));
    act_bits = bits;
    m.resize(K);
    scale.resize(C);
    for (int k = 0; k < K; ++k) m[k] = in_scale[k] / act_scale;
    for (int c = 0; c < C; ++c) scale[c] = act_scale * w_scale[c];
    requant.clear();
    if (!out_step && bits == 16)
        throw EngineError("16-bit activations need the output grid (out_step): float outputs are defined for 8-bit "
                          "activations only (the sums of 16-bit ones do not fit int32)");
    if (!out_step) return;
    requant.resize(C);
    for (int c = 0; c < C; ++c) {
        if (!(out_step[c] > 0) || !std::isfinite(out_step[c])) throw EngineError("out_step must be positive");
        requant[c] = double(act_scale) * double(w_scale[c]) / double(out_step[c]);  // as quant/numerics.py
        scale[c] = out_step[c];
    }
}

void QLinear::check(const std::string& name, int want_c, int want_k) const {
    expect(C == want_c && K == want_k,
           name + ": shape [" + std::to_string(C) + ", " + std::to_string(K) + "], expected [" +
               std::to_string(want_c) + ", " + std::to_string(want_k) + "]");
    expect(codes.size() == size_t(C) * K && m.size() == size_t(K) && scale.size() == size_t(C),
           name + ": codes or scales missing");
}

void Model::check_layer(int i) const {
    const auto& L = layers.at(i);
    const std::string p = "layer " + std::to_string(i) + " ";
    const int H = cfg.hidden, I = cfg.intermediate;
    expect(L.attn_norm.size() == size_t(H) && L.ffn_norm.size() == size_t(H), p + "norm weights must have [hidden]");
    L.q.check(p + "q_proj", cfg.q_dim(), H);
    L.k.check(p + "k_proj", cfg.kv_dim(), H);
    L.v.check(p + "v_proj", cfg.kv_dim(), H);
    L.o.check(p + "o_proj", H, cfg.q_dim());
    L.gate.check(p + "gate_proj", I, H);
    L.up.check(p + "up_proj", I, H);
    L.down.check(p + "down_proj", H, I);
}

namespace {
bool table_ok(const RowTable& t, const LlamaConfig& cfg, bool on_demand_ok) {
    const bool codes = t.codes.size() == size_t(t.rows) * t.cols || (on_demand_ok && t.on_demand);
    return t.rows == cfg.vocab && t.cols == cfg.hidden && codes && t.w_scale.size() == size_t(t.rows);
}
}  // namespace

void Model::check_embedding() const {
    expect(table_ok(embed, cfg, !cfg.tied_embeddings), "embed_tokens must be an INT8 table of [vocab, hidden] with a scale per row");
}

void Model::check_final() const {
    expect(cfg.tied_embeddings || table_ok(lm_head, cfg, false), "lm_head must be an INT8 table of [vocab, hidden]");
    expect(final_norm.size() == size_t(cfg.hidden), "model.norm.weight must have [hidden]");
}

}  // namespace edgeflow
