// The weightlet unpack kernel, written once over a small vector-ops interface (SSE2, AVX2, Neon).
//
// Ops::V holds Ops::kLanes 16-byte lanes; lane i works on group i of a run of consecutive groups (stride
// group_stride bytes in, 128 weights out). Per stripe and piece: one shift moving the stripe's position to the
// piece's bit place, one AND keeping those bits, one OR merging pieces; then one byte subtraction removes the
// offset 2^(b-1) and the 16 int8 go out with one store per lane. All shift counts are compile-time constants.
// Each ISA's Ops is a distinct type, so these templates never share instantiations across translation units
// compiled with different flags.
#pragma once

#include <cstring>
#include <utility>

#include "layout.h"

namespace edgeflow::simd {

template <class Ops, int B, int S, int I, int Stripe>
inline typename Ops::V piece(const typename Ops::V* blocks) {
  constexpr layout::Pieces P = layout::pieces_of(B);
  constexpr int w = P.w[I], sh = P.sh[I], per_block = 8 / w;
  constexpr int k = layout::first_block(B, I, S) + Stripe / per_block;
  constexpr int bit = layout::position_bit(w, Stripe % per_block);
  typename Ops::V v = blocks[k];
  if constexpr (bit > sh) v = Ops::template shift_right<bit - sh>(v);
  if constexpr (bit < sh) v = Ops::template shift_left<sh - bit>(v);
  return Ops::and_(v, Ops::splat(static_cast<uint8_t>(((1 << w) - 1) << sh)));
}

template <class Ops, int B, int S, int Stripe>
inline void stripe(const typename Ops::V* blocks, int8_t* out) {
  constexpr int n = layout::pieces_of(B).n;
  typename Ops::V u = piece<Ops, B, S, 0, Stripe>(blocks);
  if constexpr (n > 1) u = Ops::or_(u, piece<Ops, B, S, 1, Stripe>(blocks));
  if constexpr (n > 2) u = Ops::or_(u, piece<Ops, B, S, 2, Stripe>(blocks));
  Ops::store(out + int(kStripe) * Stripe, Ops::sub(u, Ops::splat(static_cast<uint8_t>(1 << (B - 1)))));
}

template <class Ops, int B, int S, int... Stripes>
inline void groups_impl(const uint8_t* src, size_t group_stride, int8_t* out, std::integer_sequence<int, Stripes...>) {
  constexpr int nb = layout::group_blocks(B, S);
  typename Ops::V blocks[nb];
  for (int k = 0; k < nb; ++k) blocks[k] = Ops::load(src + int(kBlockBytes) * k, group_stride);
  (stripe<Ops, B, S, Stripes>(blocks, out), ...);
}

// Unpacks Ops::kLanes groups of S stripes each.
template <class Ops, int B, int S>
inline void groups(const uint8_t* src, size_t group_stride, int8_t* out) {
  groups_impl<Ops, B, S>(src, group_stride, out, std::make_integer_sequence<int, S>{});
}

// The tail group of `stripes` stripes (1..8: a tail of 113..127 weights has 8), one lane.
template <class N, int B>
inline void tail(const uint8_t* src, int stripes, int8_t* out) {
  switch (stripes) {
    case 1: return groups<N, B, 1>(src, 0, out);
    case 2: return groups<N, B, 2>(src, 0, out);
    case 3: return groups<N, B, 3>(src, 0, out);
    case 4: return groups<N, B, 4>(src, 0, out);
    case 5: return groups<N, B, 5>(src, 0, out);
    case 6: return groups<N, B, 6>(src, 0, out);
    case 7: return groups<N, B, 7>(src, 0, out);
    default: return groups<N, B, 8>(src, 0, out);
  }
}

// One channel: the full groups kLanes at a time, the rest with the one-lane Ops::Narrow, then the tail group; a tail
// that ends inside a stripe goes through a stack buffer so the padding weights past dim are never written to out.
// Out of line (one symbol per ISA and width) so profiles and the static loop count in harness/pack/bench.py can
// find each width's loop.
template <class Ops, int B>
__attribute__((noinline)) void channel(const uint8_t* src, uint32_t dim, int8_t* out) {
  using N = typename Ops::Narrow;
  constexpr size_t gb = layout::group_bytes(B, layout::kFullStripes);
  const uint32_t full = dim / kGroup, rest = dim % kGroup;
  uint32_t g = 0;
  for (; g + Ops::kLanes <= full; g += Ops::kLanes) groups<Ops, B, layout::kFullStripes>(src + g * gb, gb, out + g * kGroup);
  for (; g < full; ++g) groups<N, B, layout::kFullStripes>(src + g * gb, gb, out + g * kGroup);
  if (rest == 0) return;
  const int stripes = static_cast<int>((rest + kStripe - 1) / kStripe);
  if (rest % kStripe == 0) return tail<N, B>(src + full * gb, stripes, out + full * kGroup);
  alignas(16) int8_t tmp[kGroup];
  tail<N, B>(src + full * gb, stripes, tmp);
  std::memcpy(out + full * kGroup, tmp, rest);
}

template <class Ops>
inline void channel_any(const uint8_t* src, uint32_t bits, uint32_t dim, int8_t* out) {
  switch (bits) {
    case 1: return channel<Ops, 1>(src, dim, out);
    case 2: return channel<Ops, 2>(src, dim, out);
    case 3: return channel<Ops, 3>(src, dim, out);
    case 4: return channel<Ops, 4>(src, dim, out);
    case 5: return channel<Ops, 5>(src, dim, out);
    case 6: return channel<Ops, 6>(src, dim, out);
    case 7: return channel<Ops, 7>(src, dim, out);
    default: return channel<Ops, 8>(src, dim, out);
  }
}

}  // namespace edgeflow::simd
