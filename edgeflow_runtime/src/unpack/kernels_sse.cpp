// Weightlet unpacking with SSE2 (every x86-64 CPU has it): one group (128 weights) per pass.
#include "edgeflow/unpack.h"

#if defined(__x86_64__)
#include "kernels_x86.h"
#include "weightlet_simd.h"

namespace edgeflow {
void unpack_weightlet_sse(const uint8_t* src, uint32_t bits, uint32_t dim, int8_t* out) {
  simd::channel_any<simd::Sse<0>>(src, bits, dim, out);
}
}  // namespace edgeflow
#endif
