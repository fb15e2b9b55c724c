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
inline constexpr uint32_t kVersion = 4;         // 2 added DType::U32 (per-row CRCs of the embedding); 3 the
                                                // linears' act_bits and out_step (requantized outputs); 4 a
                                                // quantized lm_head.weight (the LM head inside the bit budget)
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
  void check_crc(const TensorInfo& t, uint32_t computed) const;  // a CRC computed elsewhere (e.g. by SplitCrc)
  // The per-row CRC table of an int8 table [V, H] (model.embed_tokens.row_crc32 beside model.embed_tokens.codes:
  // U32 [V], checked at open), or nullptr.
  const TensorInfo* row_crcs_of(const TensorInfo& table) const;
  // A table read whole, checked by its row-CRC table instead of its own CRC (one pass over the rows, not two):
  // verify_rows for every row (throws naming the first row whose entry is wrong), then verify_row_chain (the entries
  // chained must give the table's CRC-32: with every row matching its entry, the table is intact).
  void verify_table_by_rows(const TensorInfo& table, const void* table_payload, const void* crc_payload) const;
  void verify_rows(const TensorInfo& table, const void* table_payload, const void* crc_payload, uint64_t row0,
                   uint64_t row1) const;
  void verify_row_chain(const TensorInfo& table, const void* crc_payload) const;

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

// The CRC-32 kernels this CPU can run, the portable one ("table") first; crc32() uses the last, or the one the
// environment variable EDGEFLOW_CRC32 names ("table", "pclmul" on x86-64, "armv8-crc" on aarch64).
struct Crc32Kernel {
  const char* name;
  uint32_t (*update)(uint32_t state, const uint8_t* p, size_t n);  // on the running (inverted) state
};
std::vector<Crc32Kernel> crc32_kernels();
const Crc32Kernel& crc32_kernel();
uint32_t crc32_with(const Crc32Kernel& kernel, const void* data, size_t n, uint32_t crc = 0);

// crc(A || B) from crc(A) and crc(B) for a fixed |B| = n bytes: Crc32Shift(n)(crc(A)) ^ crc(B) (zlib's
// crc32_combine with the length's operator built once). Lets a table's CRC be checked against its rows' CRCs.
class Crc32Shift {
 public:
  explicit Crc32Shift(uint64_t n);
  uint32_t operator()(uint32_t crc) const;

 private:
  uint32_t bytes_[4][256];  // the shift's 32 x 32 bit matrix applied to each byte of a CRC
};

// A payload's CRC-32 as independent pieces of kPiece bytes (threads can share them), combined at the end:
// combine({piece(d, n, 0), ..., piece(d, n, pieces(n) - 1)}, n) == crc32(d, n).
struct SplitCrc {
  static constexpr uint64_t kPiece = uint64_t(1) << 20;
  static size_t pieces(uint64_t size);
  static uint32_t piece(const void* data, uint64_t size, size_t i);
  static uint32_t combine(const std::vector<uint32_t>& crcs, uint64_t size);
};

}  // namespace edgeflow
