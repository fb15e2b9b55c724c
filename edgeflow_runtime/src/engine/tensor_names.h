// Filling a Model from tensors named as in the quantized artifact (docs/quantized-artifact.md), e.g.
// "model.layers.3.mlp.down_proj.codes". Used by the C ABI's in-memory engines.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model.h"

namespace edgeflow {

struct TensorView {
    std::string name, dtype;  // dtype "int8", "uint8", "uint32", "float32"
    std::vector<int64_t> shape;
    const void* data;
    std::shared_ptr<const void> owner = nullptr;  // keeps data alive: large tables borrow it instead of copying
};

// Scales of each quantized linear, kept until all its tensors are known (m and scale need in_scale, w_scale and
// act_scale together).
struct ScaleStaging {
    struct Scales {
        std::vector<float> w_scale, in_scale;
        std::vector<float> out_step;  // [C] the static output grid; empty: float outputs (a version 1/2 file)
        float act_scale = 0;
        int act_bits = 8;
        bool has_act = false;
    };
    std::map<std::string, Scales> linears;  // module name -> scales
    bool float_outputs = false;  // ignore the output grids: the CPU-only lane (edgeflow-run --float-outputs)
    void finish_layer(Model& model, int layer);  // computes m / scale of the layer's linears and checks its shapes
    void finish(Model& model);                   // every layer, then the embeddings, final norm and LM head
};

void set_named_tensor(Model& model, ScaleStaging& staging, const TensorView& t);

// The QLinear of a module name ("model.layers.3.mlp.down_proj"), or nullptr if the name is not a Llama linear.
QLinear* find_linear(Model& model, const std::string& module);

}  // namespace edgeflow
