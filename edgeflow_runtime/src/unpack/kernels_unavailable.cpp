// The SIMD kernels of the other architecture: declared everywhere (include/edgeflow/unpack.h) so tests and tools
// link on both, but unusable; path_supported() keeps dispatch from ever choosing them.
#include <stdexcept>

#include "edgeflow/unpack.h"

namespace edgeflow {
namespace {
[[noreturn]] void unavailable(const char* path, const char* arch) {
  throw std::invalid_argument(std::string("the ") + path + " unpack path exists only on " + arch);
}
}  // namespace

#if !defined(__x86_64__)
void unpack_weightlet_sse(const uint8_t*, uint32_t, uint32_t, int8_t*) { unavailable("SSE", "x86-64"); }
void unpack_weightlet_avx2(const uint8_t*, uint32_t, uint32_t, int8_t*) { unavailable("AVX2", "x86-64"); }
#endif
#if !defined(__aarch64__)
void unpack_weightlet_neon(const uint8_t*, uint32_t, uint32_t, int8_t*) { unavailable("Neon", "aarch64"); }
#endif

}  // namespace edgeflow
