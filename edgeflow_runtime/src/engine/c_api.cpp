// C ABI over Engine (include/edgeflow/engine.h): turns exceptions into error messages.
#include "edgeflow/engine.h"

#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine.h"
#include "loader.h"
#include "tensor_names.h"

using namespace edgeflow;

struct ef_engine {
    std::unique_ptr<Engine> engine;
    Model staged;            // tensors set before the first score (in-memory engines)
    ScaleStaging scales;     // per-linear scales waiting until all of a linear's tensors are set
    bool in_memory = false;
    EngineOptions opt;
};

namespace {

void set_error(char* err, size_t len, const std::string& msg) {
    if (err && len > 0) {
        std::strncpy(err, msg.c_str(), len - 1);
        err[len - 1] = '\0';
    }
}

template <class F>
int32_t guarded(char* err, size_t len, F&& f) {
    try {
        f();
        return 0;
    } catch (const std::exception& e) {
        set_error(err, len, e.what());
    } catch (...) {
        set_error(err, len, "unknown error");
    }
    return -1;
}

EngineOptions options(int32_t threads, int32_t ctx, int32_t chunk) {
    EngineOptions o;
    o.threads = threads;
    o.ctx = ctx;
    o.chunk = chunk;
    o.validate();
    return o;
}

}  // namespace

extern "C" {

ef_engine* ef_engine_open(const char* path, int32_t threads, int32_t ctx, int32_t chunk, char* err, size_t err_len) {
    auto h = std::make_unique<ef_engine>();
    if (guarded(err, err_len, [&] {
            h->opt = options(threads, ctx, chunk);
            h->engine = std::make_unique<Engine>(open_packed_model(path ? path : ""), h->opt);
        }) != 0)
        return nullptr;
    return h.release();
}

ef_engine* ef_engine_new(const ef_config* c, int32_t threads, int32_t ctx, int32_t chunk, char* err,
                         size_t err_len) {
    auto h = std::make_unique<ef_engine>();
    if (guarded(err, err_len, [&] {
            if (!c) throw EngineError("config is NULL");
            h->opt = options(threads, ctx, chunk);
            LlamaConfig& m = h->staged.cfg;
            m.hidden = c->hidden_size;
            m.intermediate = c->intermediate_size;
            m.n_layers = c->num_hidden_layers;
            m.n_heads = c->num_attention_heads;
            m.n_kv_heads = c->num_key_value_heads;
            m.head_dim = c->head_dim;
            m.vocab = c->vocab_size;
            m.max_positions = c->max_position_embeddings;
            m.tied_embeddings = c->tie_word_embeddings != 0;
            m.rms_eps = c->rms_norm_eps;
            m.rope_theta = c->rope_theta;
            m.validate();
            h->staged.layers.resize(m.n_layers);
            h->in_memory = true;
        }) != 0)
        return nullptr;
    return h.release();
}

int32_t ef_engine_set_tensor(ef_engine* e, const char* name, const char* dtype, const int64_t* shape, int32_t ndim,
                             const void* data, char* err, size_t err_len) {
    return guarded(err, err_len, [&] {
        if (!e || !e->in_memory || e->engine) throw EngineError("set_tensor needs a new in-memory engine before scoring");
        if (!name || !dtype || (ndim > 0 && !shape) || !data) throw EngineError("set_tensor: NULL argument");
        TensorView t{name, dtype, std::vector<int64_t>(shape, shape + ndim), data};
        set_named_tensor(e->staged, e->scales, t);
    });
}

int32_t ef_engine_score(ef_engine* e, const int32_t* tokens, int32_t n, float* logits_out, char* err,
                        size_t err_len) {
    return guarded(err, err_len, [&] {
        if (!e) throw EngineError("engine is NULL");
        if (n <= 0 || !tokens || !logits_out) throw EngineError("score needs at least one token and an output buffer");
        if (!e->engine) {
            e->scales.finish(e->staged);
            e->engine = std::make_unique<Engine>(std::move(e->staged), e->opt);
        }
        const auto logits = e->engine->prefill(std::vector<int32_t>(tokens, tokens + n), true, 0);
        std::memcpy(logits_out, logits.data(), logits.size() * sizeof(float));
    });
}

int32_t ef_engine_set_schedule(ef_engine* e, const char* policy, int32_t accel_threads, int32_t steal_threshold,
                               int32_t lane_help, char* err, size_t err_len) {
    return guarded(err, err_len, [&] {
        if (!e) throw EngineError("engine is NULL");
        EngineOptions o = e->opt;
        o.policy = policy ? policy : EngineOptions().policy;
        o.accel_threads = accel_threads;
        o.steal_threshold = steal_threshold;
        o.lane_help = lane_help != 0;
        o.validate();
        e->opt = o;  // an in-memory engine is built at its first score with these options
        if (e->engine) e->engine->set_schedule(o.policy, o.accel_threads, o.steal_threshold, o.lane_help);
    });
}

int32_t ef_engine_vocab_size(const ef_engine* e) {
    if (!e) return 0;
    return e->engine ? e->engine->config().vocab : e->staged.cfg.vocab;
}

const char* ef_engine_gemm_kernel(void) {
    try {
        return best_gemm_kernel().name;
    } catch (...) {
        return "invalid EDGEFLOW_GEMM";
    }
}

void ef_engine_free(ef_engine* e) { delete e; }

}  // extern "C"
