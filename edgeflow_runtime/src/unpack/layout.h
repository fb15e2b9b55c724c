// Compile-time description of the weightlet layout (docs/format.md, Q_WEIGHTLET), shared by every kernel.
#pragma once

#include <cstdint>

#include "edgeflow/unpack.h"

namespace edgeflow::layout {

struct Pieces {
  int n;      // 1..3 pieces
  int w[3];   // widths, largest first: 4, 2 or 1
  int sh[3];  // bit position of each piece in u
};

constexpr Pieces pieces_of(int bits) {
  switch (bits) {
    case 8: return {2, {4, 4, 0}, {0, 4, 0}};
    case 7: return {3, {4, 2, 1}, {0, 4, 6}};
    case 6: return {2, {4, 2, 0}, {0, 4, 0}};
    case 5: return {2, {4, 1, 0}, {0, 4, 0}};
    case 4: return {1, {4, 0, 0}, {0, 0, 0}};
    case 3: return {2, {2, 1, 0}, {0, 2, 0}};
    case 2: return {1, {2, 0, 0}, {0, 0, 0}};
    default: return {1, {1, 0, 0}, {0, 0, 0}};
  }
}

// Blocks of 16 bytes the w-bit pieces of `stripes` stripes fill.
constexpr int blocks_of(int w, int stripes) { return (stripes * w + 7) / 8; }

// Index of piece i's first block inside a group of `stripes` stripes.
constexpr int first_block(int bits, int i, int stripes) {
  int k = 0;
  for (int j = 0; j < i; ++j) k += blocks_of(pieces_of(bits).w[j], stripes);
  return k;
}

constexpr int group_blocks(int bits, int stripes) { return first_block(bits, pieces_of(bits).n, stripes); }
constexpr int group_bytes(int bits, int stripes) { return int(kBlockBytes) * group_blocks(bits, stripes); }

constexpr int kFullStripes = int(kGroup / kStripe);
static_assert(group_bytes(3, kFullStripes) == 48 && group_bytes(7, kFullStripes) == 112,
              "a full group of b-bit weights is 16*b bytes");
static_assert(group_bytes(5, 4) == 48, "a 64-weight tail of 5-bit weights: two 4-bit blocks and one 1-bit block");

// Where stripe position p of a w-bit block sits in each byte (position 0 at the MSB side).
constexpr int position_bit(int w, int p) { return 8 - (p + 1) * w; }

}  // namespace edgeflow::layout
