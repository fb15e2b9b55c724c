// 128-bit SSE2 vector ops for weightlet_simd.h. Tag keeps the SSE2 and AVX2 translation units' instantiations
// apart (each TU is compiled with its own -m flags).
#pragma once

#include <emmintrin.h>

#include <cstddef>
#include <cstdint>

namespace edgeflow::simd {

template <int Tag>
struct Sse {
  using V = __m128i;
  using Narrow = Sse;
  static constexpr int kLanes = 1;
  static V load(const uint8_t* p, size_t) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
  static void store(int8_t* p, V v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), v); }
  static V splat(uint8_t x) { return _mm_set1_epi8(static_cast<char>(x)); }
  // 16-bit lane shifts: bits that cross a byte boundary are removed by the AND that follows
  template <int N> static V shift_right(V v) { return _mm_srli_epi16(v, N); }
  template <int N> static V shift_left(V v) { return _mm_slli_epi16(v, N); }
  static V and_(V a, V b) { return _mm_and_si128(a, b); }
  static V or_(V a, V b) { return _mm_or_si128(a, b); }
  static V sub(V a, V b) { return _mm_sub_epi8(a, b); }
};

}  // namespace edgeflow::simd
