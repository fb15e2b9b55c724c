// PackedFile: parse and validate the header and metadata of a packed model file (docs/format.md), then read
// payloads on demand. Every offset and size is checked against the file before use, with overflow-safe arithmetic.
#include <cstring>

#include "edgeflow/format.h"
#include "source.h"

namespace edgeflow {
namespace {

constexpr uint32_t kConfigSize = 64, kRegionSize = 32, kTensorRecordSize = 64;
constexpr const char* kEmbedCodes = "model.embed_tokens.codes";
constexpr const char* kEmbedRowCrcs = "model.embed_tokens.row_crc32";

// Little-endian field reads from a buffer whose size the caller has checked.
template <class T>
T get(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

bool add_overflows(uint64_t a, uint64_t b, uint64_t* out) { return __builtin_add_overflow(a, b, out); }
bool mul_overflows(uint64_t a, uint64_t b, uint64_t* out) { return __builtin_mul_overflow(a, b, out); }
bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

uint64_t elem_size(DType t) {
  switch (t) {
    case DType::F32:
    case DType::U32: return 4;
    case DType::F16: return 2;
    case DType::I8:
    case DType::U8: return 1;
    default: return 0;
  }
}

}  // namespace

bool is_quantized(DType t) {
  return t == DType::QWeightlet || t == DType::QInt8 || t == DType::QMixed48 || t == DType::QKQuant;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::I8: return "i8";
    case DType::U8: return "u8";
    case DType::U32: return "u32";
    case DType::QWeightlet: return "q_weightlet";
    case DType::QInt8: return "q_int8";
    case DType::QMixed48: return "q_mixed48";
    case DType::QKQuant: return "q_kquant";
  }
  return "unknown";
}

PackedFile PackedFile::open(const std::string& path) { return PackedFile(std::make_shared<FileSource>(path), path); }

PackedFile PackedFile::from_memory(const uint8_t* data, size_t size) {
  return PackedFile(std::make_shared<MemorySource>(data, size), "<memory>");
}

PackedFile::PackedFile(std::shared_ptr<const ByteSource> src, std::string label)
    : src_(std::move(src)), label_(std::move(label)) {
  parse();
}

void PackedFile::fail(const std::string& what) const { throw FormatError(label_ + ": " + what); }

void PackedFile::parse() {
  const uint64_t actual = src_->size();
  if (actual < kHeaderSize)
    fail("truncated: " + std::to_string(actual) + " bytes, smaller than the 64-byte header");
  uint8_t h[kHeaderSize];
  src_->read(0, h, kHeaderSize);
  if (std::memcmp(h, kMagic, 8) != 0) fail("bad magic: not an EdgeFlow packed model file");
  const uint32_t version = get<uint32_t>(h + 8);
  if (version < kOldestVersion || version > kVersion)
    fail("format version " + std::to_string(version) + ", this reader supports versions " +
         std::to_string(kOldestVersion) + " to " + std::to_string(kVersion));
  if (crc32(h, 60) != get<uint32_t>(h + 60)) fail("header checksum mismatch");
  if (get<uint32_t>(h + 12) != kHeaderSize) fail("header_size is not 64");
  file_size_ = get<uint64_t>(h + 16);
  if (file_size_ != actual)
    fail("header says " + std::to_string(file_size_) + " bytes but the file has " + std::to_string(actual) +
         " (truncated or appended to)");
  const uint64_t meta_offset = get<uint64_t>(h + 24), meta_size = get<uint64_t>(h + 32);
  const uint32_t meta_crc = get<uint32_t>(h + 40);
  alignment_ = get<uint32_t>(h + 44);
  const uint32_t n_regions = get<uint32_t>(h + 48), n_tensors = get<uint32_t>(h + 52);
  packing_ = get<uint32_t>(h + 56);
  if (alignment_ < kTensorAlign || (alignment_ & (alignment_ - 1)) != 0)
    fail("alignment " + std::to_string(alignment_) + " is not a power of two >= 64");
  // u32 counts times small record sizes cannot overflow u64
  const uint64_t tables = kConfigSize + uint64_t{kRegionSize} * n_regions + uint64_t{kTensorRecordSize} * n_tensors;
  if (meta_offset != kHeaderSize || meta_size < tables || meta_size > file_size_ - meta_offset)
    fail("metadata range is inconsistent with the file");

  std::vector<uint8_t> meta(meta_size);
  src_->read(meta_offset, meta.data(), meta.size());
  if (crc32(meta.data(), meta.size()) != meta_crc) fail("metadata checksum mismatch");
  const uint8_t* m = meta.data();

  const uint8_t* c = m;
  config_.hidden_size = get<uint32_t>(c + 0);
  config_.intermediate_size = get<uint32_t>(c + 4);
  config_.num_hidden_layers = get<uint32_t>(c + 8);
  config_.num_attention_heads = get<uint32_t>(c + 12);
  config_.num_key_value_heads = get<uint32_t>(c + 16);
  config_.head_dim = get<uint32_t>(c + 20);
  config_.vocab_size = get<uint32_t>(c + 24);
  config_.max_position_embeddings = get<uint32_t>(c + 28);
  config_.rms_norm_eps = get<float>(c + 32);
  config_.rope_theta = get<float>(c + 36);
  config_.tie_word_embeddings = (get<uint32_t>(c + 40) & 1) != 0;
  const uint64_t strings_size = get<uint32_t>(c + 44), json_size = get<uint32_t>(c + 48);
  if (tables + strings_size + json_size != meta_size) fail("metadata size disagrees with its tables");
  const uint8_t* strings = m + tables;
  provenance_.assign(reinterpret_cast<const char*>(strings + strings_size), json_size);

  uint64_t end_prev = meta_offset + meta_size;
  uint32_t listed = 0;
  regions_.reserve(n_regions);
  for (uint32_t i = 0; i < n_regions; ++i) {
    const uint8_t* r = m + kConfigSize + uint64_t{kRegionSize} * i;
    RegionInfo reg{};
    const uint32_t kind = get<uint32_t>(r);
    if (kind > 2) fail("region " + std::to_string(i) + ": unknown kind " + std::to_string(kind));
    reg.kind = static_cast<RegionKind>(kind);
    reg.layer = get<uint32_t>(r + 4);
    reg.offset = get<uint64_t>(r + 8);
    reg.size = get<uint64_t>(r + 16);
    reg.first_tensor = get<uint32_t>(r + 24);
    reg.n_tensors = get<uint32_t>(r + 28);
    uint64_t end;
    if (reg.offset % alignment_ || reg.size % alignment_) fail("region " + std::to_string(i) + " is not aligned");
    if (add_overflows(reg.offset, reg.size, &end) || reg.offset < end_prev || end > file_size_)
      fail("region " + std::to_string(i) + " overlaps the metadata or another region, or points past the end of "
           "the file");
    // regions list consecutive runs of the tensor table, in order, covering it exactly
    if (reg.first_tensor != listed || uint64_t{reg.first_tensor} + reg.n_tensors > n_tensors)
      fail("region " + std::to_string(i) + " lists tensors out of order or past the index");
    listed += reg.n_tensors;
    end_prev = end;
    regions_.push_back(reg);
  }

  if (listed != n_tensors) fail("the regions do not list every tensor");
  tensors_.reserve(n_tensors);
  const uint8_t* base = m + kConfigSize + uint64_t{kRegionSize} * n_regions;
  for (uint32_t i = 0; i < n_tensors; ++i) {
    const uint8_t* r = base + uint64_t{kTensorRecordSize} * i;
    const uint64_t name_off = get<uint32_t>(r), name_len = get<uint32_t>(r + 4);
    const std::string idx = "tensor " + std::to_string(i);
    if (name_len == 0 || name_off + name_len > strings_size) fail(idx + ": name outside the string table");
    TensorInfo t{};
    t.name.assign(reinterpret_cast<const char*>(strings + name_off), name_len);
    t.dtype = static_cast<DType>(r[8]);
    t.ndim = r[9];
    t.region = get<uint32_t>(r + 12);
    for (int d = 0; d < 4; ++d) t.shape[d] = get<uint32_t>(r + 16 + 4 * d);
    t.offset = get<uint64_t>(r + 32);
    t.size = get<uint64_t>(r + 40);
    t.crc32 = get<uint32_t>(r + 48);
    const std::string who = t.name;
    if (t.ndim > 4 || t.region >= n_regions) fail(who + ": ndim or region out of range");
    const RegionInfo& reg = regions_[t.region];
    if (i < reg.first_tensor || i >= reg.first_tensor + reg.n_tensors) fail(who + ": not listed by its region");
    uint64_t end;
    if (t.offset % kTensorAlign || t.offset < reg.offset || add_overflows(t.offset, t.size, &end) ||
        end > reg.offset + reg.size)
      fail(who + ": payload lies outside its region (index points past it) or is not 64-aligned");
    uint64_t count = 1;
    for (uint32_t d = 0; d < t.ndim; ++d)
      if (mul_overflows(count, t.shape[d], &count)) fail(who + ": shape overflows");
    if (is_quantized(t.dtype)) {
      if (t.ndim != 2 || t.shape[0] == 0 || t.shape[1] == 0 || t.shape[0] >= (1u << 31) || t.shape[1] >= (1u << 31))
        fail(who + ": a quantized weight must be 2-D with 1 <= C, D < 2^31");
      if (t.dtype == DType::QInt8 && t.size != count) fail(who + ": raw INT8 payload size disagrees with its shape");
      if (version < 4 && t.name == "lm_head.weight")
        fail(who + ": a quantized LM head needs format version 4, the file is version " + std::to_string(version));
    } else if (t.dtype == DType::U32 && version < 2) {
      fail(who + ": dtype u32 needs format version 2, the file is version " + std::to_string(version));
    } else if (version < 3 && (ends_with(t.name, ".out_step") || ends_with(t.name, ".act_bits"))) {
      fail(who + ": a linear's numerics need format version 3, the file is version " + std::to_string(version));
    } else if (elem_size(t.dtype) != 0) {
      uint64_t bytes;
      if (mul_overflows(count, elem_size(t.dtype), &bytes) || bytes != t.size)
        fail(who + ": payload size disagrees with its dtype and shape");
    } else {
      fail(who + ": unknown dtype " + std::to_string(static_cast<int>(r[8])));
    }
    tensors_.push_back(std::move(t));
  }
  for (uint32_t i = 0; i < tensors_.size(); ++i)
    if (!by_name_.emplace(tensors_[i].name, i).second) fail("tensor name " + tensors_[i].name + " appears twice");
  if (const TensorInfo* crcs = find(kEmbedRowCrcs)) {
    const TensorInfo* table = find(kEmbedCodes);
    if (!table || table->dtype != DType::I8 || table->ndim != 2 || crcs->dtype != DType::U32 || crcs->ndim != 1 ||
        crcs->shape[0] != table->shape[0] || crcs->region != table->region)
      fail(std::string(kEmbedRowCrcs) + " must be u32 [V] beside an i8 [V, H] " + kEmbedCodes + " in its region");
  }
}

const TensorInfo* PackedFile::find(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

const TensorInfo& PackedFile::at(std::string_view name) const {
  const TensorInfo* t = find(name);
  if (!t) fail("no tensor " + std::string(name));
  return *t;
}

const RegionInfo* PackedFile::layer_region(uint32_t layer) const {
  for (const auto& r : regions_)
    if (r.kind == RegionKind::Layer && r.layer == layer) return &r;
  return nullptr;
}

void PackedFile::verify_payload(const TensorInfo& t, const void* payload) const { check_crc(t, crc32(payload, t.size)); }

void PackedFile::check_crc(const TensorInfo& t, uint32_t computed) const {
  if (computed != t.crc32) fail(t.name + ": checksum mismatch (payload corrupt)");
}

const TensorInfo* PackedFile::row_crcs_of(const TensorInfo& table) const {
  return table.name == kEmbedCodes ? find(kEmbedRowCrcs) : nullptr;
}

void PackedFile::verify_rows(const TensorInfo& table, const void* table_payload, const void* crc_payload,
                             uint64_t row0, uint64_t row1) const {
  const TensorInfo& crcs = *row_crcs_of(table);
  const uint64_t cols = table.shape[1];
  const auto* rows = static_cast<const uint8_t*>(table_payload);
  for (uint64_t r = row0; r < row1; ++r) {
    uint32_t want;
    std::memcpy(&want, static_cast<const uint8_t*>(crc_payload) + 4 * r, 4);
    if (crc32(rows + r * cols, cols) != want)
      fail(crcs.name + ": the entry of row " + std::to_string(r) + " disagrees with the row (or the row is corrupt)");
  }
}

void PackedFile::verify_row_chain(const TensorInfo& table, const void* crc_payload) const {
  const uint64_t rows = table.shape[0];
  const Crc32Shift shift(table.shape[1]);
  uint32_t chained = 0;
  for (uint64_t r = 0; r < rows; ++r) {
    uint32_t entry;
    std::memcpy(&entry, static_cast<const uint8_t*>(crc_payload) + 4 * r, 4);
    chained = (r ? shift(chained) : 0) ^ entry;
  }
  if (chained != table.crc32) fail(table.name + ": checksum mismatch (its rows do not chain to the table's CRC)");
}

void PackedFile::verify_table_by_rows(const TensorInfo& table, const void* table_payload,
                                      const void* crc_payload) const {
  verify_rows(table, table_payload, crc_payload, 0, table.shape[0]);
  verify_row_chain(table, crc_payload);
}

void PackedFile::read_tensor(const TensorInfo& t, void* dst, bool verify_crc) const {
  src_->read(t.offset, dst, t.size);
  if (!verify_crc) return;
  const TensorInfo* crcs = row_crcs_of(t);
  if (!crcs) return verify_payload(t, dst);
  std::vector<uint8_t> entries(crcs->size);  // a table read whole: checked through its row CRCs
  read_tensor(*crcs, entries.data(), true);
  verify_table_by_rows(t, dst, entries.data());
}

void PackedFile::read_region(const RegionInfo& r, void* dst, bool verify_crc) const {
  src_->read(r.offset, dst, r.size);
  if (!verify_crc) return;
  const auto at = [&](const TensorInfo& t) { return static_cast<const uint8_t*>(dst) + (t.offset - r.offset); };
  for (uint32_t i = r.first_tensor; i < r.first_tensor + r.n_tensors; ++i) {
    const TensorInfo& t = tensors_[i];
    if (const TensorInfo* crcs = row_crcs_of(t)) verify_table_by_rows(t, at(t), at(*crcs));  // same region (open)
    else verify_payload(t, at(t));
  }
}

}  // namespace edgeflow
