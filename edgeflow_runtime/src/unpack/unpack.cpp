// QuantTensor validation, per-channel sizes, and the dispatch from a channel range to the kernels.
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "cpu_features.h"
#include "kernel_choice.h"
#include "layout.h"

namespace edgeflow {

uint64_t bits_section_size(uint64_t channels) { return ((3 * channels + 7) / 8 + 63) / 64 * 64; }

uint64_t channel_bytes(DType layout_type, uint32_t bits, uint32_t dim) {
  const layout::Pieces p = layout::pieces_of(static_cast<int>(bits));
  switch (layout_type) {
    case DType::QWeightlet: {
      const uint32_t rest = dim % kGroup;
      uint64_t n = uint64_t{dim / kGroup} * kBlockBytes * bits;
      if (rest) n += layout::group_bytes(static_cast<int>(bits), static_cast<int>((rest + kStripe - 1) / kStripe));
      return n;
    }
    case DType::QInt8: return dim;
    case DType::QMixed48: return bits <= 4 ? (uint64_t{dim} + 1) / 2 : dim;
    case DType::QKQuant: {
      uint64_t n = 0;
      for (int k = 0; k < p.n; ++k) n += (uint64_t{dim} * p.w[k] + 7) / 8;
      return n;
    }
    default: throw FormatError(std::string("not a quantized dtype: ") + dtype_name(layout_type));
  }
}

QuantTensor QuantTensor::view(DType dtype, uint32_t channels, uint32_t dim, const uint8_t* payload, uint64_t size) {
  if (!is_quantized(dtype)) throw FormatError(std::string("not a quantized dtype: ") + dtype_name(dtype));
  if (channels == 0 || dim == 0 || channels >= (1u << 31) || dim >= (1u << 31))
    throw FormatError("quantized weight shape must have 1 <= C, D < 2^31");
  // every channel takes at least one payload byte: checked before allocating per-channel tables, so a corrupt
  // shape cannot make the reader allocate more than a few times the payload it was given
  if (channels > size)
    throw FormatError("payload of " + std::to_string(size) + " bytes cannot hold " + std::to_string(channels) +
                      " channels");
  QuantTensor t;
  t.dtype = dtype;
  t.channels = channels;
  t.dim = dim;
  t.bits.assign(channels, 8);
  uint64_t head = 0;
  if (dtype != DType::QInt8) {
    head = bits_section_size(channels);
    if (size < head)
      throw FormatError("payload of " + std::to_string(size) + " bytes is shorter than its bit-width section");
    for (uint32_t c = 0; c < channels; ++c) {
      const uint64_t bit = 3ull * c;
      const uint32_t two = payload[bit / 8] | (bit / 8 + 1 < head ? payload[bit / 8 + 1] << 8 : 0);
      t.bits[c] = static_cast<uint8_t>(((two >> (bit % 8)) & 7) + 1);
    }
    // padding bits after the last code must be zero (bit 3C .. 8*head - 1)
    const uint64_t used = 3ull * channels;
    if (used % 8 && (payload[used / 8] >> (used % 8)) != 0)
      throw FormatError("bit-width section: padding bits after the last 3-bit code are not zero");
    for (uint64_t i = (used + 7) / 8; i < head; ++i)
      if (payload[i] != 0) throw FormatError("bit-width section: padding bits after the last 3-bit code are not zero");
  }
  t.chan_offset.resize(uint64_t{channels} + 1);
  uint64_t pos = 0;
  for (uint32_t c = 0; c < channels; ++c) {
    t.chan_offset[c] = pos;
    pos += channel_bytes(dtype, t.bits[c], dim);  // <= 2^31 * 2^31: no overflow
  }
  t.chan_offset[channels] = pos;
  if (pos != size - head)
    throw FormatError(std::string(dtype_name(dtype)) + " payload: channel data is " + std::to_string(size - head) +
                      " bytes but the bit-widths imply " + std::to_string(pos));
  t.data = payload + head;
  return t;
}

QuantTensor QuantTensor::view(const TensorInfo& info, const uint8_t* payload) {
  if (!is_quantized(info.dtype) || info.ndim != 2) throw FormatError(info.name + ": not a quantized weight");
  try {
    return view(info.dtype, info.shape[0], info.shape[1], payload, info.size);
  } catch (const FormatError& e) {
    throw FormatError(info.name + ": " + e.what());
  }
}

// --- path selection ---------------------------------------------------------------------------------------------

const char* path_name(UnpackPath p) {
  switch (p) {
    case UnpackPath::Auto: return "auto";
    case UnpackPath::Scalar: return "scalar";
    case UnpackPath::SSE: return "sse";
    case UnpackPath::AVX2: return "avx2";
    case UnpackPath::Neon: return "neon";
  }
  return "?";
}

namespace {

using Kernel = void (*)(const uint8_t*, uint32_t, uint32_t, int8_t*);

struct UnpackKernel {
  const char* name;  // path_name(path): what EDGEFLOW_UNPACK names
  UnpackPath path;
  Kernel fn;         // the weightlet kernel (the other layouts have their reference only)
};

// The weightlet kernels this CPU can run, the reference first and the best last (kernel_choice.h's order).
std::vector<UnpackKernel> unpack_kernels() {
  std::vector<UnpackKernel> ks{{"scalar", UnpackPath::Scalar, unpack_weightlet_ref}};
#if defined(__x86_64__)
  ks.push_back({"sse", UnpackPath::SSE, unpack_weightlet_sse});
  if (cpu_features().avx2) ks.push_back({"avx2", UnpackPath::AVX2, unpack_weightlet_avx2});
#elif defined(__aarch64__)
  ks.push_back({"neon", UnpackPath::Neon, unpack_weightlet_neon});
#endif
  return ks;
}

const UnpackKernel* find(UnpackPath p) {
  static const std::vector<UnpackKernel> ks = unpack_kernels();
  if (p == UnpackPath::Auto) return &ks.back();
  for (const auto& k : ks)
    if (k.path == p) return &k;
  return nullptr;
}

const UnpackKernel& resolve(UnpackPath p) {
  const UnpackKernel* k = find(p);
  if (!k) throw std::invalid_argument(std::string("unpack path ") + path_name(p) + " is not supported on this CPU");
  return *k;
}

// The best kernel, or the one EDGEFLOW_UNPACK names ("auto": the best), chosen once.
UnpackPath& current() {
  static UnpackPath p = [] {
    const char* env = std::getenv("EDGEFLOW_UNPACK");
    if (env && std::strcmp(env, "auto") == 0) return resolve(UnpackPath::Auto).path;
    return choose_kernel(unpack_kernels(), "EDGEFLOW_UNPACK").path;
  }();
  return p;
}

}  // namespace

bool path_supported(UnpackPath p) { return find(p) != nullptr; }

void set_unpack_path(UnpackPath p) { current() = resolve(p).path; }
UnpackPath active_unpack_path() { return current(); }

void unpack(const QuantTensor& t, uint32_t c0, uint32_t c1, int8_t* out) {
  if (c0 > c1 || c1 > t.channels) throw std::out_of_range("channel range outside the tensor");
  Kernel k = unpack_weightlet_ref;
  switch (t.dtype) {
    case DType::QWeightlet: k = resolve(current()).fn; break;
    case DType::QMixed48: k = unpack_mixed48_ref; break;
    case DType::QKQuant: k = unpack_kquant_ref; break;
    case DType::QInt8:
      std::memcpy(out, t.data + t.chan_offset[c0], (t.chan_offset[c1] - t.chan_offset[c0]));
      return;
    default: throw FormatError("not a quantized dtype");
  }
  for (uint32_t c = c0; c < c1; ++c) k(t.data + t.chan_offset[c], t.bits[c], t.dim, out + uint64_t{c - c0} * t.dim);
}

}  // namespace edgeflow
