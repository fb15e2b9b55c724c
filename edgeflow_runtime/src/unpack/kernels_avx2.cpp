// Weightlet unpacking with AVX2 (this file is compiled with -mavx2 and only called when the CPU has AVX2): two
// consecutive groups per pass, one per 128-bit lane, so every shift count stays a uniform immediate.
#include "edgeflow/unpack.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "kernels_x86.h"
#include "weightlet_simd.h"

namespace edgeflow {
namespace simd {

struct Avx2 {
  using V = __m256i;
  using Narrow = Sse<1>;  // odd last full group and the tail group, VEX-encoded in this TU
  static constexpr int kLanes = 2;
  static V load(const uint8_t* p, size_t stride) {
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))),
                                   _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + stride)), 1);
  }
  static void store(int8_t* p, V v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(v));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p + kGroup), _mm256_extracti128_si256(v, 1));
  }
  static V splat(uint8_t x) { return _mm256_set1_epi8(static_cast<char>(x)); }
  template <int N> static V shift_right(V v) { return _mm256_srli_epi16(v, N); }
  template <int N> static V shift_left(V v) { return _mm256_slli_epi16(v, N); }
  static V and_(V a, V b) { return _mm256_and_si256(a, b); }
  static V or_(V a, V b) { return _mm256_or_si256(a, b); }
  static V sub(V a, V b) { return _mm256_sub_epi8(a, b); }
};

}  // namespace simd

void unpack_weightlet_avx2(const uint8_t* src, uint32_t bits, uint32_t dim, int8_t* out) {
  simd::channel_any<simd::Avx2>(src, bits, dim, out);
}

}  // namespace edgeflow
#endif
