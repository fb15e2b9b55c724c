// The packed model file (docs/format.md): open and validate, list and look up tensors, read a tensor's or a whole
// layer's bytes. Every field is checked before use; a corrupt or truncated file throws FormatError, never reads out
// of bounds. Thread-safety: a PackedFile is immutable after open; reads use pread and may run concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace edgeflow {

inline constexpr char kMagic[8] = {'E', 'F', 'P', 'K', '\r', '\n', '\x1a', '\n'};
inline constexpr uint32_t kVersion = 2;         // 2 added DType::U32 (per-row CRCs of the embedding)
inline constexpr uint32_t kOldestVersion = 1;   // still read: a version 1 file has no U32 tensors
inline constexpr uint32_t kHeaderSize = 64;
inline constexpr uint32_t kTensorAlign = 64;  // payloads start on this inside a region

class FormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class DType : uint8_t {
  F32 = 1, F16 = 2, I8 = 3, U8 = 4, U32 = 5,
  QWeightlet = 16,  // EdgeFlow's SIMD-friendly weightlet layout
  QInt8 = 17,       // every code padded to 8 bits (baseline)
  QMixed48 = 18,    // each channel padded to 4 or 8 bits (baseline)
  QKQuant = 19,     // per-channel bit planes, K-quant-like (baseline)
};
bool is_quantized(DType t);
const char* dtype_name(DType t);

enum class RegionKind : uint32_t { Embedding = 0, Layer = 1, Final = 2 };

struct ModelConfig {
  uint32_t hidden_size, intermediate_size, num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim,
      vocab_size, max_position_embeddings;
  float rms_norm_eps, rope_theta;
  bool tie_word_embeddings;
};

struct TensorInfo {
  std::string name;
  DType dtype;
  uint32_t ndim;
  uint32_t shape[4];  // dims past ndim are 0; quantized weights are [C, D]
  uint32_t region;
  uint64_t offset;  // absolute file offset of the payload
  uint64_t size;    // payload bytes
  uint32_t crc32;
};

struct RegionInfo {
  RegionKind kind;
  uint32_t layer;  // for RegionKind::Layer
  uint64_t offset, size;  // multiples of alignment(): readable with O_DIRECT
  uint32_t first_tensor, n_tensors;  // tensors()[first_tensor .. first_tensor + n_tensors)
};

// Where the bytes come from: a file (pread) or memory (tests, the fuzzer).
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  virtual uint64_t size() const = 0;
  // Reads exactly n bytes at off into dst or throws FormatError.
  virtual void read(uint64_t off, void* dst, size_t n) const = 0;
};

class PackedFile {
 public:
  static PackedFile open(const std::string& path);
  static PackedFile from_memory(const uint8_t* data, size_t size);  // data must outlive the PackedFile
  explicit PackedFile(std::shared_ptr<const ByteSource> src, std::string label);

  const ModelConfig& config() const { return config_; }
  const std::string& provenance_json() const { return provenance_; }
  uint32_t alignment() const { return alignment_; }
  uint32_t packing() const { return packing_; }  // dtype id of the quantized linears, 0 if none
  uint64_t file_size() const { return file_size_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const std::vector<RegionInfo>& regions() const { return regions_; }

  const TensorInfo* find(std::string_view name) const;  // nullptr if absent
  const TensorInfo& at(std::string_view name) const;    // throws FormatError if absent
  const RegionInfo* layer_region(uint32_t layer) const;

  // dst holds t.size bytes. With verify_crc the payload's CRC-32 is checked (throws on mismatch).
  void read_tensor(const TensorInfo& t, void* dst, bool verify_crc = true) const;
  // dst holds r.size bytes; tensor i's payload lands at dst + (tensors()[i].offset - r.offset).
  void read_region(const RegionInfo& r, void* dst, bool verify_crc = true) const;
  // Checks the CRC-32 of a payload read by other means (e.g. the runtime's own O_DIRECT reads).
  void verify_payload(const TensorInfo& t, const void* payload) const;

  const ByteSource& source() const { return *src_; }
  const std::string& path() const { return label_; }  // "<memory>" for from_memory

 private:
  void parse();
  [[noreturn]] void fail(const std::string& what) const;

  std::shared_ptr<const ByteSource> src_;
  std::string label_;
  ModelConfig config_{};
  std::string provenance_;
  uint32_t alignment_ = 0, packing_ = 0;
  uint64_t file_size_ = 0;
  std::vector<TensorInfo> tensors_;
  std::vector<RegionInfo> regions_;
  std::unordered_map<std::string, uint32_t> by_name_;
};

uint32_t crc32(const void* data, size_t n, uint32_t crc = 0);  // zlib's CRC-32; chainable like zlib.crc32

}  // namespace edgeflow
