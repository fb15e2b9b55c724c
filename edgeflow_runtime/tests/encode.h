// Test-only encoders written from docs/format.md (independently of the Python packer), so the native kernels can be
// checked on their own, e.g. under qemu where Python is not available.
#pragma once

#include <cstdint>
#include <vector>

#include "../src/unpack/layout.h"

namespace edgeflow::test {

// Appends one weightlet channel of offset-binary codes u[0..dim) to out.
inline void encode_weightlet(const uint8_t* u, int bits, uint32_t dim, std::vector<uint8_t>& out) {
  const layout::Pieces p = layout::pieces_of(bits);
  for (uint32_t g0 = 0; g0 < dim; g0 += kGroup) {
    const uint32_t n = dim - g0 < kGroup ? dim - g0 : kGroup;
    const int stripes = static_cast<int>((n + kStripe - 1) / kStripe);
    const size_t base = out.size();
    out.resize(base + layout::group_bytes(bits, stripes), 0);
    for (int i = 0; i < stripes * int(kStripe); ++i) {
      const int v = uint32_t(i) < n ? u[g0 + i] : 1 << (bits - 1);  // padding: q = 0
      const int s = i / int(kStripe), j = i % int(kStripe);
      for (int k = 0; k < p.n; ++k) {
        const int w = p.w[k], per_block = 8 / w;
        const int block = layout::first_block(bits, k, stripes) + s / per_block;
        out[base + kBlockBytes * block + j] |=
            static_cast<uint8_t>(((v >> p.sh[k]) & ((1 << w) - 1)) << layout::position_bit(w, s % per_block));
      }
    }
  }
}

inline void encode_kquant(const uint8_t* u, int bits, uint32_t dim, std::vector<uint8_t>& out) {
  const layout::Pieces p = layout::pieces_of(bits);
  for (int k = 0; k < p.n; ++k) {
    const size_t base = out.size();
    out.resize(base + (uint64_t{dim} * p.w[k] + 7) / 8, 0);
    for (uint32_t i = 0; i < dim; ++i) {
      const uint64_t bit = uint64_t{i} * p.w[k];
      out[base + bit / 8] |= static_cast<uint8_t>(((u[i] >> p.sh[k]) & ((1 << p.w[k]) - 1)) << (bit % 8));
    }
  }
}

inline void encode_mixed48(const uint8_t* u, int bits, uint32_t dim, std::vector<uint8_t>& out) {
  const int offset = 1 << (bits - 1);
  if (bits > 4) {
    for (uint32_t i = 0; i < dim; ++i) out.push_back(static_cast<uint8_t>(u[i] - offset));  // q as int8
    return;
  }
  for (uint32_t i = 0; i < dim; i += 2) {
    const int lo = u[i] - offset + 8, hi = i + 1 < dim ? u[i + 1] - offset + 8 : 8;
    out.push_back(static_cast<uint8_t>(lo | hi << 4));
  }
}

// A whole payload: the bit-width section, then the channels.
inline std::vector<uint8_t> encode_payload(DType dtype, const std::vector<uint8_t>& u, const std::vector<uint8_t>& bits,
                                           uint32_t dim) {
  std::vector<uint8_t> out;
  const uint32_t channels = static_cast<uint32_t>(bits.size());
  if (dtype != DType::QInt8) {
    out.assign(bits_section_size(channels), 0);
    for (uint32_t c = 0; c < channels; ++c)
      for (int b = 0; b < 3; ++b)
        if (((bits[c] - 1) >> b) & 1) out[(3 * c + b) / 8] |= static_cast<uint8_t>(1 << ((3 * c + b) % 8));
  }
  for (uint32_t c = 0; c < channels; ++c) {
    const uint8_t* row = u.data() + uint64_t{c} * dim;
    switch (dtype) {
      case DType::QWeightlet: encode_weightlet(row, bits[c], dim, out); break;
      case DType::QKQuant: encode_kquant(row, bits[c], dim, out); break;
      case DType::QMixed48: encode_mixed48(row, bits[c], dim, out); break;
      default:
        for (uint32_t i = 0; i < dim; ++i) out.push_back(static_cast<uint8_t>(row[i] - (1 << (bits[c] - 1))));
    }
  }
  return out;
}

}  // namespace edgeflow::test
