// A Llama-family model held in memory as the runtime computes it: INT8 codes for every linear layer and the
// embeddings, float32 for the rest (docs/quantized-artifact.md).
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace edgeflow {

// Any problem with the model or the request that the user can fix: bad file, bad shapes, prompt too long...
struct EngineError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// A file cannot be opened or read (missing, permissions, O_DIRECT unsupported, I/O error).
struct IoError : EngineError {
    using EngineError::EngineError;
};

struct LlamaConfig {
    int hidden = 0;        // H
    int intermediate = 0;  // I
    int n_layers = 0;
    int n_heads = 0;
    int n_kv_heads = 0;
    int head_dim = 0;  // d
    int vocab = 0;     // V
    float rms_eps = 1e-5f;
    float rope_theta = 10000.f;
    int max_positions = 2048;
    bool tied_embeddings = true;

    int q_dim() const { return n_heads * head_dim; }
    int kv_dim() const { return n_kv_heads * head_dim; }
    void validate() const;  // throws EngineError naming the first bad field
};

// Read-only array that owns a copy of its values or borrows them from a buffer kept alive by `owner` (the packed
// file's region as read from disk: the embedding table is used in place, not copied).
template <class T>
struct SharedArray {
    static SharedArray copy_of(const T* p, size_t n) {
        auto v = std::make_shared<std::vector<T>>(p, p + n);
        return {v->data(), n, v};
    }
    static SharedArray borrow(const T* p, size_t n, std::shared_ptr<const void> owner) { return {p, n, std::move(owner)}; }
    const T* data() const { return ptr; }
    size_t size() const { return n; }

    const T* ptr = nullptr;
    size_t n = 0;
    std::shared_ptr<const void> owner;
};

// Rows of an INT8 table that stay on storage until first looked up (the loader's, for an untied embedding).
class RowSource {
public:
    virtual ~RowSource() = default;
    // Row r's cols codes, valid while the source lives; throws EngineError naming the row if it cannot be read or
    // fails its check. Safe to call from several threads.
    virtual const int8_t* row(int r) = 0;
};

// Per-row INT8 table for the embeddings and the weight-only LM head: in memory (codes), or, for an embedding that
// is not also the LM head, read row by row when looked up (on_demand; codes empty).
struct RowTable {
    int rows = 0, cols = 0;
    SharedArray<int8_t> codes;       // [rows, cols]
    SharedArray<float> w_scale;      // [rows]
    SharedArray<uint32_t> row_crc32; // [rows] CRC-32 of each row's codes, when the packed file has them
    std::shared_ptr<RowSource> on_demand;

    const int8_t* row(int r) const { return on_demand ? on_demand->row(r) : codes.data() + size_t(r) * cols; }
};

// The int8 codes of one linear: owned (resize/assign, left uninitialised: the unpack kernels write them right
// away) or placed inside a larger buffer that `owner` keeps alive (the loader's one arena for every layer).
class CodeBuffer {
public:
    size_t size() const { return n_; }
    bool empty() const { return n_ == 0; }
    int8_t* data() { return ptr_; }
    const int8_t* data() const { return ptr_; }
    int8_t* begin() { return ptr_; }
    int8_t* end() { return ptr_ + n_; }
    void resize(size_t n) {
        owned_.reset(new int8_t[n]);
        ptr_ = owned_.get();
        n_ = n;
        owner_.reset();
    }
    void assign(const int8_t* first, const int8_t* last) {
        resize(size_t(last - first));
        std::copy(first, last, ptr_);
    }
    void place(int8_t* p, size_t n, std::shared_ptr<void> owner) {
        owned_.reset();
        ptr_ = p;
        n_ = n;
        owner_ = std::move(owner);
    }

private:
    std::unique_ptr<int8_t[]> owned_;
    std::shared_ptr<void> owner_;
    int8_t* ptr_ = nullptr;
    size_t n_ = 0;
};

// One quantized linear y = linear(x) with C outputs and K inputs, as the accelerator lane computes it
// (docs/quantized-artifact.md): its input quantized to act_bits, the integer matmul, and - with an output grid, as
// an NPU gives it back - the sums requantized to output codes on that grid; the CPU side multiplies what the lane
// returns (sums or codes) by `scale`.
struct QLinear {
    int C = 0, K = 0;
    int act_bits = 8;           // 8: int8 inputs in [-127, 127]; 16: int16 in [-32767, 32767] (A16, HTP's A16W8)
    CodeBuffer codes;           // [C, K] row-major: K codes of output channel c at c * K
    std::vector<float> m;       // [K] in_scale[k] / act_scale: multiplies x before rounding
    std::vector<float> scale;   // [C] act_scale * w_scale[c] (float outputs) or out_step[c] (requantized)
    std::vector<double> requant;  // [C] act_scale * w_scale[c] / out_step[c] in float64; empty: float outputs

    // Sets m and scale from the artifact's values; out_step [C] (or nullptr: float outputs, 8-bit activations only)
    // is the static output grid. codes must already hold C * K values.
    void set_scales(const float* w_scale, const float* in_scale, float act_scale, const float* out_step = nullptr,
                    int bits = 8);
    bool requantized() const { return !requant.empty(); }
    int out_qmax() const { return (1 << (act_bits - 1)) - 1; }  // output codes lie in [-out_qmax - 1, out_qmax]
    void check(const std::string& name, int want_c, int want_k) const;
};


struct LayerWeights {
    std::vector<float> attn_norm, ffn_norm;  // [H] RMSNorm weights
    QLinear q, k, v, o;                      // q [q_dim, H], k/v [kv_dim, H], o [H, q_dim]
    QLinear gate, up, down;                  // gate/up [I, H], down [H, I]
};

struct Model {
    LlamaConfig cfg;
    RowTable embed;       // [V, H]
    RowTable lm_head;     // [V, H]; empty when tied (the embedding table is used)
    std::vector<float> final_norm;  // [H]
    std::vector<LayerWeights> layers;

    const RowTable& head() const { return cfg.tied_embeddings ? embed : lm_head; }
    // Each throws EngineError naming the tensor whose shape disagrees with cfg.
    void check_layer(int i) const;
    void check_embedding() const;
    void check_final() const;  // final norm and (untied) LM head
    void check_globals() const { check_embedding(), check_final(); }
};

}  // namespace edgeflow
