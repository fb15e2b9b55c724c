#include "tensor_names.h"

#include <cctype>
#include <cstring>

namespace edgeflow {
namespace {

size_t numel(const TensorView& t) {
    size_t n = 1;
    for (auto d : t.shape) n *= size_t(d);
    return n;
}

std::string shape_str(const std::vector<int64_t>& s) {
    std::string out = "[";
    for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
    return out + "]";
}

void expect_tensor(const TensorView& t, const char* dtype, std::vector<int64_t> shape) {
    if (t.dtype != dtype || t.shape != shape)
        throw EngineError(t.name + ": expected " + dtype + " " + shape_str(shape) + ", got " + t.dtype + " " +
                          shape_str(t.shape));
}

std::vector<float> floats(const TensorView& t) {
    std::vector<float> v(numel(t));
    std::memcpy(v.data(), t.data, v.size() * sizeof(float));
    return v;
}

template <class T>
SharedArray<T> shared(const TensorView& t) {
    const auto* p = static_cast<const T*>(t.data);
    return t.owner ? SharedArray<T>::borrow(p, numel(t), t.owner) : SharedArray<T>::copy_of(p, numel(t));
}

bool split_suffix(const std::string& name, std::string& module, std::string& field) {
    const auto dot = name.rfind('.');
    if (dot == std::string::npos) return false;
    module = name.substr(0, dot);
    field = name.substr(dot + 1);
    return true;
}

}  // namespace

QLinear* find_linear(Model& model, const std::string& module) {
    const std::string prefix = "model.layers.";
    if (module.compare(0, prefix.size(), prefix) != 0) return nullptr;
    size_t pos = prefix.size();
    int layer = 0;
    if (pos >= module.size() || !std::isdigit(static_cast<unsigned char>(module[pos]))) return nullptr;
    while (pos < module.size() && std::isdigit(static_cast<unsigned char>(module[pos])))
        layer = layer * 10 + (module[pos++] - '0');
    if (layer >= int(model.layers.size())) return nullptr;
    auto& L = model.layers[layer];
    const std::string rest = module.substr(pos);
    static const std::pair<const char*, QLinear LayerWeights::*> table[] = {
        {".self_attn.q_proj", &LayerWeights::q}, {".self_attn.k_proj", &LayerWeights::k},
        {".self_attn.v_proj", &LayerWeights::v}, {".self_attn.o_proj", &LayerWeights::o},
        {".mlp.gate_proj", &LayerWeights::gate}, {".mlp.up_proj", &LayerWeights::up},
        {".mlp.down_proj", &LayerWeights::down}};
    for (const auto& [suffix, member] : table)
        if (rest == suffix) return &(L.*member);
    return nullptr;
}

void set_named_tensor(Model& model, ScaleStaging& staging, const TensorView& t) {
    const LlamaConfig& cfg = model.cfg;
    std::string module, field;
    if (!split_suffix(t.name, module, field)) throw EngineError("unknown tensor " + t.name);
    const int64_t H = cfg.hidden, V = cfg.vocab;

    if (QLinear* q = find_linear(model, module)) {
        auto& sc = staging.linears[module];
        if (field == "codes") {
            if (t.dtype != "int8" || t.shape.size() != 2) throw EngineError(t.name + ": expected a 2-D int8 tensor");
            q->C = int(t.shape[0]);
            q->K = int(t.shape[1]);
            q->codes.assign(static_cast<const int8_t*>(t.data), static_cast<const int8_t*>(t.data) + numel(t));
        } else if (field == "bits") {
            if (t.dtype != "uint8" || t.shape.size() != 1) throw EngineError(t.name + ": expected a 1-D uint8 tensor");
        } else if (field == "w_scale" || field == "in_scale" || field == "out_step") {
            if (t.dtype != "float32" || t.shape.size() != 1)
                throw EngineError(t.name + ": expected a 1-D float32 tensor");
            (field == "w_scale" ? sc.w_scale : field == "in_scale" ? sc.in_scale : sc.out_step) = floats(t);
        } else if (field == "act_bits") {
            expect_tensor(t, "uint8", {});
            sc.act_bits = *static_cast<const uint8_t*>(t.data);
            if (sc.act_bits != 8 && sc.act_bits != 16) throw EngineError(t.name + ": must be 8 or 16");
        } else if (field == "act_scale") {
            expect_tensor(t, "float32", {});
            std::memcpy(&sc.act_scale, t.data, sizeof(float));
            sc.has_act = true;
        } else {
            throw EngineError("unknown tensor " + t.name);
        }
        return;
    }
    const bool embed = module == "model.embed_tokens", head = module == "lm_head";
    if (embed || head) {
        if (head && cfg.tied_embeddings) throw EngineError(t.name + ": the model has tied embeddings");
        RowTable& tab = embed ? model.embed : model.lm_head;
        if (field == "codes") {
            expect_tensor(t, "int8", {V, H});
            tab.rows = int(V);
            tab.cols = int(H);
            tab.codes = shared<int8_t>(t);
        } else if (field == "w_scale") {
            expect_tensor(t, "float32", {V});
            // (the head's copied: a head packed in the bit budget would otherwise keep its whole region's buffer)
            tab.w_scale = head ? SharedArray<float>::copy_of(static_cast<const float*>(t.data), numel(t))
                               : shared<float>(t);
        } else if (field == "row_crc32" && embed) {
            expect_tensor(t, "uint32", {V});
            tab.row_crc32 = shared<uint32_t>(t);
        } else if (field == "bits") {  // (the codes are int8 whatever their width: the widths are only checked)
            expect_tensor(t, "uint8", {V});
            const auto* b = static_cast<const uint8_t*>(t.data);
            for (int64_t i = 0; i < V; ++i)
                if (embed ? b[i] != 8 : b[i] < 1 || b[i] > 8)
                    throw EngineError(t.name + (embed ? ": the runtime needs INT8 embeddings (all bits 8)"
                                                      : ": LM head rows must have 1..8 bits"));
        } else if (field == "weight") {
            throw EngineError(t.name + ": float16 embeddings (embedding_bits=16) are not supported by the runtime; "
                                       "quantize them to per-row INT8");
        } else {
            throw EngineError("unknown tensor " + t.name);
        }
        return;
    }
    if (module == "model.norm" && field == "weight") {
        expect_tensor(t, "float32", {H});
        model.final_norm = floats(t);
        return;
    }
    // model.layers.{i}.input_layernorm.weight / post_attention_layernorm.weight
    const std::string prefix = "model.layers.";
    if (field == "weight" && module.compare(0, prefix.size(), prefix) == 0) {
        const auto dot = module.find('.', prefix.size());
        const std::string idx = module.substr(prefix.size(), dot - prefix.size());
        const std::string norm = dot == std::string::npos ? "" : module.substr(dot + 1);
        if (!idx.empty() && idx.find_first_not_of("0123456789") == std::string::npos && idx.size() < 7) {
            const int layer = std::stoi(idx);
            if (layer < int(model.layers.size()) && (norm == "input_layernorm" || norm == "post_attention_layernorm")) {
                expect_tensor(t, "float32", {H});
                (norm == "input_layernorm" ? model.layers[layer].attn_norm : model.layers[layer].ffn_norm) = floats(t);
                return;
            }
        }
    }
    throw EngineError("unknown tensor " + t.name);
}

void ScaleStaging::finish_layer(Model& model, int l) {
    for (const char* p : {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                          "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"}) {
        const std::string module = "model.layers." + std::to_string(l) + "." + p;
        QLinear* q = find_linear(model, module);
        auto it = linears.find(module);
        if (it == linears.end() || q->codes.empty()) throw EngineError(module + ": codes missing");
        const Scales& s = it->second;
        if (!s.has_act) throw EngineError(module + ": no act_scale (weight-only schemes are not runtime-compatible)");
        if (s.w_scale.size() != size_t(q->C) || s.in_scale.size() != size_t(q->K))
            throw EngineError(module + ": w_scale must have [C] and in_scale [K] values");
        if (!s.out_step.empty() && s.out_step.size() != size_t(q->C))
            throw EngineError(module + ": out_step must have [C] values");
        const bool requantize = !s.out_step.empty() && !float_outputs;
        try {
            q->set_scales(s.w_scale.data(), s.in_scale.data(), s.act_scale, requantize ? s.out_step.data() : nullptr,
                          s.act_bits);
        } catch (const EngineError& e) {
            throw EngineError(module + ": " + e.what());
        }
        linears.erase(it);
    }
    model.check_layer(l);
}

void ScaleStaging::finish(Model& model) {
    for (int l = 0; l < model.cfg.n_layers; ++l) finish_layer(model, l);
    model.check_globals();
}

}  // namespace edgeflow
