// The CRC-32 kernels behind crc32() (crc32.cpp), on the running state: crc32(data, n, crc) is
// ~update(~crc, data, n). Each computes zlib's CRC-32 exactly (tests/test_format.cpp compares them on every length
// up to several folds, every alignment and the chaining of calls).
#pragma once
#include <cstddef>
#include <cstdint>

namespace edgeflow {

uint32_t crc32_update_table(uint32_t state, const uint8_t* p, size_t n);   // slice-by-8, portable
#if defined(__x86_64__)
uint32_t crc32_update_pclmul(uint32_t state, const uint8_t* p, size_t n);  // crc32_pclmul.cpp (SSE4.1 + PCLMULQDQ)
#elif defined(__aarch64__)
uint32_t crc32_update_armv8(uint32_t state, const uint8_t* p, size_t n);   // crc32_armv8.cpp (ARMv8 CRC32)
#endif

}  // namespace edgeflow
