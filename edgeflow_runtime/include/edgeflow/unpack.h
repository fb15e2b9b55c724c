// Unpacking quantized linear weights (docs/format.md, "Data types") into int8 [C, D] row-major.
//
// QuantTensor::view validates a payload once (bit-width section, exact size) and precomputes each channel's offset;
// unpack() then converts any range of channels. Kernels: a scalar reference (`*_ref`), SSE2/AVX2 on x86-64 chosen at
// run time, Neon on aarch64, all bit-exact. set_unpack_path() or the environment variable EDGEFLOW_UNPACK
// (auto|scalar|sse|avx2|neon) forces one, so tests cover every path the CPU supports.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "edgeflow/format.h"

namespace edgeflow {

inline constexpr uint32_t kGroup = 128;      // weights per weightlet group
inline constexpr uint32_t kStripe = 16;      // weights one 128-bit register unpacks
inline constexpr uint32_t kBlockBytes = 16;  // one 128-bit register
static_assert(kGroup == kStripe * 8, "a 1-bit block (16 bytes) must hold exactly one group");
static_assert(kBlockBytes * 8 == kGroup, "a group of b-bit weights must be 16*b bytes");

// Bytes of the bit-width section for C channels: ceil(3C/8) rounded up to 64.
uint64_t bits_section_size(uint64_t channels);
// Bytes one channel of `bits` bits and `dim` weights takes in the given layout.
uint64_t channel_bytes(DType layout, uint32_t bits, uint32_t dim);

struct QuantTensor {
  DType dtype = DType::QWeightlet;
  uint32_t channels = 0, dim = 0;
  std::vector<uint8_t> bits;          // [C], 1..8 (all 8 for QInt8)
  std::vector<uint64_t> chan_offset;  // [C + 1], byte offset of each channel's data from `data`
  const uint8_t* data = nullptr;      // channel data (after the bit-width section); borrowed from the payload

  // Throws FormatError if the payload does not match dtype, shape and its own bit-widths.
  static QuantTensor view(DType dtype, uint32_t channels, uint32_t dim, const uint8_t* payload, uint64_t size);
  static QuantTensor view(const TensorInfo& t, const uint8_t* payload);
};

enum class UnpackPath { Auto, Scalar, SSE, AVX2, Neon };
const char* path_name(UnpackPath p);
bool path_supported(UnpackPath p);
// Throws std::invalid_argument if the CPU cannot run p. Auto picks the best supported path. Process-wide: set it
// before threads start unpacking. unpack() itself is thread-safe (it only reads its QuantTensor).
void set_unpack_path(UnpackPath p);
UnpackPath active_unpack_path();  // the path unpack() uses now (never Auto)

// out: (c1 - c0) x dim int8, row-major. Requires c0 <= c1 <= channels.
void unpack(const QuantTensor& t, uint32_t c0, uint32_t c1, int8_t* out);

// --- kernels, one channel at a time (exposed for tests and benchmarks) ---
// Weightlet: src holds floor(dim/128) groups of 16*bits bytes, then the tail group (docs/format.md).
void unpack_weightlet_ref(const uint8_t* src, uint32_t bits, uint32_t dim, int8_t* out);
void unpack_weightlet_sse(const uint8_t* src, uint32_t bits, uint32_t dim, int8_t* out);   // x86-64 only
void unpack_weightlet_avx2(const uint8_t* src, uint32_t bits, uint32_t dim, int8_t* out);  // x86-64 only
void unpack_weightlet_neon(const uint8_t* src, uint32_t bits, uint32_t dim, int8_t* out);  // aarch64 only
void unpack_mixed48_ref(const uint8_t* src, uint32_t bits, uint32_t dim, int8_t* out);
void unpack_kquant_ref(const uint8_t* src, uint32_t bits, uint32_t dim, int8_t* out);

}  // namespace edgeflow
