// CRC-32 (zlib's polynomial) with the ARMv8 CRC32 instructions (compiled with +crc; called only when AT_HWCAP says
// the CPU has them): crc32x takes 8 bytes per instruction on the same running state as the table kernel.
#include <arm_acle.h>

#include <cstring>

#include "crc32_kernels.h"

namespace edgeflow {

uint32_t crc32_update_armv8(uint32_t state, const uint8_t* p, size_t n) {
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    state = __crc32d(state, v);
  }
  for (; n; ++p, --n) state = __crc32b(state, *p);
  return state;
}

}  // namespace edgeflow
