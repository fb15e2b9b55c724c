// CRC-32 (zlib's, reflected 0xEDB88320) by carry-less multiplication (compiled with -msse4.1 -mpclmul; called only
// when the CPU has both), the folding method of Gopal et al., "Fast CRC Computation for Generic Polynomials Using
// PCLMULQDQ Instruction" (Intel, 2009).
//
// In the reflected domain a 128-bit block B (bit 0 = the message's first bit) contributes B * x^d mod P to a CRC
// taken d bits later. Folding multiplies B's two 64-bit halves by constants k = x^e mod P (32-bit values, stored
// bit-reflected and shifted by one as 33-bit numbers) and xors the 128-bit products into the block d bits ahead, so
// the message shrinks 128 bits at a time without changing its CRC:
//   - four lanes of 16 bytes fold across 64 bytes (k1, k2: x^(4*128+32), x^(4*128-32) mod P), four independent
//     chains of pclmulqdq while the next 64 bytes load;
//   - then the lanes into one, and each further 16 bytes (k3, k4: x^(128+32), x^(128-32) mod P);
//   - 128 -> 64 bits (k4), 64 -> 32 bits (k5 = x^64 mod P), then a Barrett reduction (mu = x^64 / P, and P) gives the
//     32-bit state the table kernel would hold after the same bytes.
// Buffers under 64 bytes, and the last len % 16 bytes, go to the table kernel, continuing the same state.
#include <immintrin.h>

#include "crc32_kernels.h"

namespace edgeflow {
namespace {

// One fold: the two halves of x times the constant pair k (low half by k's low 64 bits, high by its high), xored.
inline __m128i fold(__m128i x, __m128i k) {
  return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11));
}

inline __m128i load(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }

}  // namespace

uint32_t crc32_update_pclmul(uint32_t state, const uint8_t* p, size_t n) {
  if (n < 64) return crc32_update_table(state, p, n);
  const __m128i k1k2 = _mm_set_epi64x(0x01c6e41596, 0x0154442bd4);
  const __m128i k3k4 = _mm_set_epi64x(0x00ccaa009e, 0x01751997d0);
  const __m128i k5 = _mm_set_epi64x(0, 0x0163cd6124);
  const __m128i poly_mu = _mm_set_epi64x(0x01f7011641, 0x01db710641);  // mu (high), P (low)
  const __m128i low32 = _mm_setr_epi32(-1, 0, -1, 0);

  __m128i x0 = _mm_xor_si128(load(p), _mm_cvtsi32_si128(int(state)));  // the state enters with the first bytes
  __m128i x1 = load(p + 16), x2 = load(p + 32), x3 = load(p + 48);
  p += 64, n -= 64;
  for (; n >= 64; p += 64, n -= 64) {
    x0 = _mm_xor_si128(fold(x0, k1k2), load(p));
    x1 = _mm_xor_si128(fold(x1, k1k2), load(p + 16));
    x2 = _mm_xor_si128(fold(x2, k1k2), load(p + 32));
    x3 = _mm_xor_si128(fold(x3, k1k2), load(p + 48));
  }
  x0 = _mm_xor_si128(fold(x0, k3k4), x1);
  x0 = _mm_xor_si128(fold(x0, k3k4), x2);
  x0 = _mm_xor_si128(fold(x0, k3k4), x3);
  for (; n >= 16; p += 16, n -= 16) x0 = _mm_xor_si128(fold(x0, k3k4), load(p));

  // 128 -> 64 bits: the low half times k4, added to the high half (shifted down)
  x0 = _mm_xor_si128(_mm_srli_si128(x0, 8), _mm_clmulepi64_si128(x0, k3k4, 0x10));
  // 64 -> 32 bits: the low 32 bits times k5, added to the rest
  x0 = _mm_xor_si128(_mm_srli_si128(x0, 4), _mm_clmulepi64_si128(_mm_and_si128(x0, low32), k5, 0x00));
  // Barrett: q = (low 32 bits * mu) mod x^32, state = that value's bits 32..63 after adding q * P
  __m128i q = _mm_clmulepi64_si128(_mm_and_si128(x0, low32), poly_mu, 0x10);
  q = _mm_clmulepi64_si128(_mm_and_si128(q, low32), poly_mu, 0x00);
  state = uint32_t(_mm_extract_epi32(_mm_xor_si128(x0, q), 1));
  return crc32_update_table(state, p, n);
}

}  // namespace edgeflow
