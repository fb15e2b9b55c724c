// CRC-32 as in zlib/PNG (reflected polynomial 0xEDB88320). The portable kernel is slice-by-8 (~8 table lookups per
// 8 bytes, ~2 GB/s per core); where the CPU has them, carry-less multiplication (x86 PCLMULQDQ, crc32_pclmul.cpp:
// ~10x that) or aarch64's CRC32 instructions (crc32_armv8.cpp) compute the same function. The loader checks every
// payload as it streams in, on the compute threads, so the CRC's speed is on the cold start's critical path.
#include <algorithm>
#include <cstring>
#include <vector>

#include "cpu_features.h"
#include "crc32_kernels.h"
#include "edgeflow/format.h"
#include "kernel_choice.h"

namespace edgeflow {
namespace {

struct Tables {
  uint32_t t[8][256];
  Tables() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; ++i)
      for (int s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xFF];
  }
};

const Tables& tables() {
  static const Tables tb;
  return tb;
}

}  // namespace

uint32_t crc32_update_table(uint32_t state, const uint8_t* p, size_t n) {
  const auto& t = tables().t;
  for (; n >= 8; n -= 8, p += 8) {
    uint32_t lo, hi;
    std::memcpy(&lo, p, 4);  // little-endian hosts only (x86-64, aarch64)
    std::memcpy(&hi, p + 4, 4);
    lo ^= state;
    state = t[7][lo & 0xFF] ^ t[6][(lo >> 8) & 0xFF] ^ t[5][(lo >> 16) & 0xFF] ^ t[4][lo >> 24] ^
            t[3][hi & 0xFF] ^ t[2][(hi >> 8) & 0xFF] ^ t[1][(hi >> 16) & 0xFF] ^ t[0][hi >> 24];
  }
  while (n--) state = t[0][(state ^ *p++) & 0xFF] ^ (state >> 8);
  return state;
}

std::vector<Crc32Kernel> crc32_kernels() {
  std::vector<Crc32Kernel> ks{{"table", crc32_update_table}};
#if defined(__x86_64__)
  if (cpu_features().pclmul) ks.push_back({"pclmul", crc32_update_pclmul});
#elif defined(__aarch64__)
  if (cpu_features().crc32) ks.push_back({"armv8-crc", crc32_update_armv8});
#endif
  return ks;
}

const Crc32Kernel& crc32_kernel() {
  static const Crc32Kernel chosen = choose_kernel(crc32_kernels(), "EDGEFLOW_CRC32");
  return chosen;
}

uint32_t crc32_with(const Crc32Kernel& kernel, const void* data, size_t n, uint32_t crc) {
  return ~kernel.update(~crc, static_cast<const uint8_t*>(data), n);
}

uint32_t crc32(const void* data, size_t n, uint32_t crc) { return crc32_with(crc32_kernel(), data, n, crc); }

// CRC-32 is linear over GF(2): appending n bytes to a message maps its CRC through a fixed 32 x 32 bit matrix
// (x^(8n) mod the polynomial), so crc(A || B) = shift_n(crc(A)) ^ crc(B) for |B| = n. shift_n is built by squaring
// the one-zero-bit operator (the classic zlib crc32_combine construction), as its 32 columns.
namespace {

uint32_t apply(const uint32_t* matrix, uint32_t vec) {
  uint32_t sum = 0;
  for (int i = 0; vec; ++i, vec >>= 1)
    if (vec & 1) sum ^= matrix[i];
  return sum;
}

void square(uint32_t* out, const uint32_t* m) {
  for (int i = 0; i < 32; ++i) out[i] = apply(m, m[i]);
}

}  // namespace

Crc32Shift::Crc32Shift(uint64_t n) {
  uint32_t step[32], tmp[32], columns[32];  // step: the operator for 2^k zero bits, k growing
  step[0] = 0xEDB88320u;                    // one zero bit: the reflected polynomial
  for (int i = 1; i < 32; ++i) step[i] = 1u << (i - 1);
  for (int i = 0; i < 32; ++i) columns[i] = 1u << i;  // identity
  square(tmp, step);  // 2 bits
  square(step, tmp);  // 4 bits
  square(tmp, step);  // 8 bits = one byte
  std::memcpy(step, tmp, sizeof step);
  for (; n; n >>= 1) {  // columns = step^(bits of n) applied in turn; step squares each round
    if (n & 1)
      for (int i = 0; i < 32; ++i) columns[i] = apply(step, columns[i]);
    square(tmp, step);
    std::memcpy(step, tmp, sizeof step);
  }
  for (int b = 0; b < 4; ++b)  // the matrix byte by byte: 4 lookups per shift
    for (uint32_t v = 0; v < 256; ++v) bytes_[b][v] = apply(columns, v << (8 * b));
}

uint32_t Crc32Shift::operator()(uint32_t crc) const {
  return bytes_[0][crc & 0xFF] ^ bytes_[1][(crc >> 8) & 0xFF] ^ bytes_[2][(crc >> 16) & 0xFF] ^ bytes_[3][crc >> 24];
}

size_t SplitCrc::pieces(uint64_t size) { return size == 0 ? 1 : size_t((size + kPiece - 1) / kPiece); }

uint32_t SplitCrc::piece(const void* data, uint64_t size, size_t i) {
  const uint64_t begin = uint64_t(i) * kPiece;
  return crc32(static_cast<const uint8_t*>(data) + begin, std::min<uint64_t>(kPiece, size - begin));
}

uint32_t SplitCrc::combine(const std::vector<uint32_t>& crcs, uint64_t size) {
  if (crcs.size() == 1) return crcs[0];  // most payloads: no shift to build (~27 us each, on the unpack path)
  static const Crc32Shift whole(kPiece);
  const uint64_t last = size - uint64_t(crcs.size() - 1) * kPiece;
  const Crc32Shift tail(last);
  uint32_t crc = crcs[0];
  for (size_t i = 1; i < crcs.size(); ++i) crc = (i + 1 == crcs.size() ? tail(crc) : whole(crc)) ^ crcs[i];
  return crc;
}

}  // namespace edgeflow
