// Weightlet unpacking with Neon (aarch64 baseline): one group per pass. Neon shifts bytes directly, so nothing
// crosses a byte boundary; the AND still drops the other stripes' bits.
#include "edgeflow/unpack.h"

#if defined(__aarch64__)
#include <arm_neon.h>

#include "weightlet_simd.h"

namespace edgeflow {
namespace simd {

struct Neon {
  using V = uint8x16_t;
  using Narrow = Neon;
  static constexpr int kLanes = 1;
  static V load(const uint8_t* p, size_t) { return vld1q_u8(p); }
  static void store(int8_t* p, V v) { vst1q_s8(p, vreinterpretq_s8_u8(v)); }
  static V splat(uint8_t x) { return vdupq_n_u8(x); }
  template <int N> static V shift_right(V v) { return vshrq_n_u8(v, N); }
  template <int N> static V shift_left(V v) { return vshlq_n_u8(v, N); }
  static V and_(V a, V b) { return vandq_u8(a, b); }
  static V or_(V a, V b) { return vorrq_u8(a, b); }
  static V sub(V a, V b) { return vsubq_u8(a, b); }
};

}  // namespace simd

void unpack_weightlet_neon(const uint8_t* src, uint32_t bits, uint32_t dim, int8_t* out) {
  simd::channel_any<simd::Neon>(src, bits, dim, out);
}

}  // namespace edgeflow
#endif
