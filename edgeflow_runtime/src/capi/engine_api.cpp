// The C ABI of the inference engine (include/edgeflow/engine.h) over edgeflow::Engine; errors: guarded.h.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "edgeflow/engine.h"
#include "engine.h"
#include "forward.h"
#include "gemm.h"
#include "gemm16.h"
#include "guarded.h"
#include "loader.h"
#include "ops.h"
#include "tensor_names.h"

using edgeflow::capi::guarded;
using namespace edgeflow;

struct ef_engine {
  std::unique_ptr<Engine> engine;
  Model staged;         // tensors set before the first score (in-memory engines)
  ScaleStaging scales;  // per-linear scales waiting until all of a linear's tensors are set
  bool in_memory = false;
  EngineOptions opt;
};

namespace {

EngineOptions options(int32_t threads, int32_t ctx, int32_t chunk) {
  EngineOptions o;
  o.threads = threads;
  o.ctx = ctx;
  o.chunk = chunk;
  o.validate();
  return o;
}

ef_engine& checked(ef_engine* e) {
  if (!e) throw EngineError("engine is NULL");
  return *e;
}

}  // namespace

extern "C" {

uint64_t ef_config_size(void) { return sizeof(ef_config); }

int64_t ef_config_offset(const char* field) {
#define EF_FIELD(f) {#f, offsetof(ef_config, f)}
  static const std::pair<const char*, size_t> fields[] = {
      EF_FIELD(hidden_size),         EF_FIELD(intermediate_size), EF_FIELD(num_hidden_layers),
      EF_FIELD(num_attention_heads), EF_FIELD(num_key_value_heads), EF_FIELD(head_dim),
      EF_FIELD(vocab_size),          EF_FIELD(max_position_embeddings), EF_FIELD(tie_word_embeddings),
      EF_FIELD(rms_norm_eps),        EF_FIELD(rope_theta)};
#undef EF_FIELD
  for (const auto& [name, offset] : fields)
    if (field && std::strcmp(field, name) == 0) return static_cast<int64_t>(offset);
  return -1;
}

ef_engine* ef_engine_open(const char* path, int32_t threads, int32_t ctx, int32_t chunk) {
  auto h = std::make_unique<ef_engine>();
  if (guarded([&] {
        h->opt = options(threads, ctx, chunk);
        h->engine = std::make_unique<Engine>(open_packed_model(path ? path : ""), h->opt);
      }) != 0)
    return nullptr;
  return h.release();
}

ef_engine* ef_engine_new(const ef_config* c, int32_t threads, int32_t ctx, int32_t chunk) {
  auto h = std::make_unique<ef_engine>();
  if (guarded([&] {
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

int ef_engine_set_tensor(ef_engine* e, const char* name, const char* dtype, const int64_t* shape, int32_t ndim,
                         const void* data) {
  return guarded([&] {
    ef_engine& h = checked(e);
    if (!h.in_memory || h.engine) throw EngineError("set_tensor needs a new in-memory engine before scoring");
    if (!name || !dtype || (ndim > 0 && !shape) || !data) throw EngineError("set_tensor: NULL argument");
    TensorView t{name, dtype, std::vector<int64_t>(shape, shape + ndim), data};
    set_named_tensor(h.staged, h.scales, t);
  });
}

int ef_engine_score(ef_engine* e, const int32_t* tokens, int32_t n, float* logits_out) {
  return ef_engine_score_after(e, 0, tokens, n, 0, n, logits_out);
}

int ef_engine_score_after(ef_engine* e, int32_t keep, const int32_t* tokens, int32_t n, int32_t reserve,
                          int32_t last, float* logits_out) {
  return guarded([&] {
    ef_engine& h = checked(e);
    if (n <= 0 || !tokens || !logits_out) throw EngineError("score needs at least one token and an output buffer");
    if (keep < 0 || reserve < 0) throw EngineError("keep and reserve must not be negative");
    if (last < 1 || last > n) throw EngineError("last must be in [1, n], got " + std::to_string(last));
    if (!h.engine) {
      if (keep > 0) throw EngineError("nothing to keep: no sequence has been scored yet");
      h.scales.finish(h.staged);
      h.engine = std::make_unique<Engine>(std::move(h.staged), h.opt);
    }
    const std::vector<int32_t> ids(tokens, tokens + n);
    const auto logits = keep > 0 ? h.engine->extend(keep, ids, last) : h.engine->prefill(ids, last, reserve);
    std::memcpy(logits_out, logits.data(), logits.size() * sizeof(float));
  });
}

int ef_engine_score_branches(ef_engine* e, int32_t keep, const int32_t* tokens, const int32_t* lengths,
                             int32_t n_branches, float* logits_out) {
  return guarded([&] {
    ef_engine& h = checked(e);
    if (n_branches <= 0 || !tokens || !lengths || !logits_out)
      throw EngineError("score_branches needs at least one branch, its tokens and an output buffer");
    if (!h.engine) throw EngineError("nothing to keep: no sequence has been scored yet");
    const std::vector<int> lens(lengths, lengths + n_branches);
    long n = 0;
    for (const int len : lens) n += std::max(len, 0);  // run_prefill names a non-positive length
    const std::vector<int32_t> ids(tokens, tokens + n);
    const auto logits = h.engine->extend_branches(keep, ids, lens);
    std::memcpy(logits_out, logits.data(), logits.size() * sizeof(float));
  });
}

int ef_engine_set_schedule(ef_engine* e, const char* policy, int32_t accel_threads, int32_t steal_threshold,
                           int32_t lane_help) {
  return guarded([&] {
    ef_engine& h = checked(e);
    EngineOptions o = h.opt;
    o.policy = policy ? policy : EngineOptions().policy;
    o.accel_threads = accel_threads;
    o.steal_threshold = steal_threshold;
    o.lane_help = lane_help != 0;
    o.validate();
    h.opt = o;  // an in-memory engine is built at its first score with these options
    if (h.engine) h.engine->set_schedule(o.policy, o.accel_threads, o.steal_threshold, o.lane_help);
  });
}

int32_t ef_engine_vocab_size(const ef_engine* e) {
  if (!e) return 0;
  return e->engine ? e->engine->config().vocab : e->staged.cfg.vocab;
}

const char* ef_engine_gemm_kernel(void) {
  const char* name = "invalid EDGEFLOW_GEMM";
  guarded([&] { name = best_gemm_kernel().name; });
  return name;
}

void ef_engine_free(ef_engine* e) { delete e; }

int ef_accel_linear(int32_t T, int32_t C, int32_t K, const float* x, const int8_t* codes, const float* w_scale,
                    const float* in_scale, float act_scale, const float* out_step, int32_t act_bits, float* y) {
  return guarded([&] {
    if (T <= 0 || C <= 0 || K <= 0 || K >= (1 << 17)) throw EngineError("ef_accel_linear: bad shape");
    if (!x || !codes || !w_scale || !in_scale || !y) throw EngineError("ef_accel_linear: NULL argument");
    QLinear w;  // the same scales, codes and matmul a loaded model's linears use
    w.C = C;
    w.K = K;
    w.set_scales(w_scale, in_scale, act_scale, out_step, act_bits);
    w.codes.assign(codes, codes + size_t(C) * K);
    std::vector<int8_t> xq(size_t(T) * K * (act_bits / 8));
    std::vector<int32_t> acc(size_t(T) * C);
    quantize_rows_bits(act_bits, T, K, x, w.m.data(), xq.data());
    ThreadPool pool(1);
    accel_matmul(pool, best_gemm_kernel(), best_gemm16_kernel(), xq.data(), T, w, acc.data());
    dequantize_rows(T, C, acc.data(), C, w.scale.data(), y);
  });
}

int ef_engine_set_float_outputs(ef_engine* e, int32_t on) {
  return guarded([&] {
    ef_engine& h = checked(e);
    if (!h.in_memory || h.engine) throw EngineError("set_float_outputs needs a new in-memory engine before scoring");
    h.scales.float_outputs = on != 0;
  });
}

}  // extern "C"
