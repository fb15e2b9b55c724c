// Scalar reference kernels: one weight at a time, straight from docs/format.md. The SIMD weightlet kernels are
// tested bit-exact against unpack_weightlet_ref; the K-quant-like baseline is meant to be unpacked this way.
#include <cstring>

#include "layout.h"

namespace edgeflow {

void unpack_weightlet_ref(const uint8_t* src, uint32_t bits, uint32_t dim, int8_t* out) {
  const layout::Pieces p = layout::pieces_of(static_cast<int>(bits));
  const int offset = 1 << (bits - 1);
  for (uint32_t g0 = 0; g0 < dim; g0 += kGroup) {
    const uint32_t n = dim - g0 < kGroup ? dim - g0 : kGroup;
    const int stripes = static_cast<int>((n + kStripe - 1) / kStripe);
    for (uint32_t i = 0; i < n; ++i) {
      const int s = static_cast<int>(i / kStripe), j = static_cast<int>(i % kStripe);
      int u = 0;
      for (int k = 0; k < p.n; ++k) {
        const int w = p.w[k], per_block = 8 / w;
        const int block = layout::first_block(static_cast<int>(bits), k, stripes) + s / per_block;
        const uint8_t byte = src[kBlockBytes * block + j];
        u |= ((byte >> layout::position_bit(w, s % per_block)) & ((1 << w) - 1)) << p.sh[k];
      }
      out[g0 + i] = static_cast<int8_t>(u - offset);
    }
    src += layout::group_bytes(static_cast<int>(bits), stripes);
  }
}

void unpack_mixed48_ref(const uint8_t* src, uint32_t bits, uint32_t dim, int8_t* out) {
  if (bits > 4) {
    std::memcpy(out, src, dim);
    return;
  }
  // byte-wise so the compiler vectorises it: the format is meant to be nearly free to unpack
  for (uint32_t j = 0; j < dim / 2; ++j) {
    out[2 * j] = static_cast<int8_t>((src[j] & 15) - 8);
    out[2 * j + 1] = static_cast<int8_t>((src[j] >> 4) - 8);
  }
  if (dim & 1) out[dim - 1] = static_cast<int8_t>((src[dim / 2] & 15) - 8);
}

void unpack_kquant_ref(const uint8_t* src, uint32_t bits, uint32_t dim, int8_t* out) {
  const layout::Pieces p = layout::pieces_of(static_cast<int>(bits));
  const uint8_t* plane[3];
  for (int k = 0; k < p.n; ++k) {
    plane[k] = src;
    src += (uint64_t{dim} * p.w[k] + 7) / 8;
  }
  const int offset = 1 << (bits - 1);
  for (uint32_t i = 0; i < dim; ++i) {
    int u = 0;
    for (int k = 0; k < p.n; ++k) {
      const uint64_t bit = uint64_t{i} * p.w[k];
      u |= ((plane[k][bit / 8] >> (bit % 8)) & ((1 << p.w[k]) - 1)) << p.sh[k];
    }
    out[i] = static_cast<int8_t>(u - offset);
  }
}

}  // namespace edgeflow
