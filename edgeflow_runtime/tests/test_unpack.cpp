// Property tests: random codes, bit-widths 1..8 in every channel mix and odd dimensions round-trip bit-exactly
// through every unpack path this CPU supports, for every layout; bad payloads are rejected.
#include <cstring>
#include <random>
#include <string>

#include "check.h"
#include "edgeflow/unpack.h"
#include "encode.h"

using namespace edgeflow;

namespace {

struct Case {
  std::vector<uint8_t> bits, u;  // u: offset-binary codes [C, D]
  std::vector<int8_t> q;         // expected int8 codes
  uint32_t dim;
};

Case random_case(std::mt19937& rng, uint32_t channels, uint32_t dim, int fixed_bits) {
  Case c{{}, {}, {}, dim};
  for (uint32_t i = 0; i < channels; ++i) c.bits.push_back(fixed_bits ? fixed_bits : 1 + rng() % 8);
  for (uint32_t i = 0; i < channels; ++i)
    for (uint32_t j = 0; j < dim; ++j) {
      const int b = c.bits[i];
      c.u.push_back(static_cast<uint8_t>(rng() % (1u << b)));
      c.q.push_back(static_cast<int8_t>(c.u.back() - (1 << (b - 1))));
    }
  return c;
}

void check_paths(const Case& c, DType dtype) {
  const auto payload = test::encode_payload(dtype, c.u, c.bits, c.dim);
  const uint32_t channels = static_cast<uint32_t>(c.bits.size());
  auto t = QuantTensor::view(dtype, channels, c.dim, payload.data(), payload.size());
  if (dtype != DType::QInt8) CHECK(t.bits == c.bits);
  for (UnpackPath p : {UnpackPath::Scalar, UnpackPath::SSE, UnpackPath::AVX2, UnpackPath::Neon}) {
    if (!path_supported(p)) continue;
    set_unpack_path(p);
    std::vector<int8_t> out(c.q.size() + 64, 0x55);  // guard bytes past the end must stay untouched
    unpack(t, 0, channels, out.data());
    const bool same = std::memcmp(out.data(), c.q.data(), c.q.size()) == 0;
    if (!same) std::fprintf(stderr, "mismatch: %s path, dtype %s, dim %u\n", path_name(p), dtype_name(dtype), c.dim);
    CHECK(same);
    for (size_t i = c.q.size(); i < out.size(); ++i) CHECK(out[i] == 0x55);
    if (channels > 2) {  // a channel range lands at the start of out
      std::vector<int8_t> part(uint64_t{c.dim} * 2);
      unpack(t, 1, 3, part.data());
      CHECK(std::memcmp(part.data(), c.q.data() + c.dim, part.size()) == 0);
    }
  }
  set_unpack_path(UnpackPath::Auto);
}

void test_round_trips() {
  std::mt19937 rng(1234);
  const uint32_t dims[] = {1, 15, 16, 17, 100, 127, 128, 129, 255, 256, 300, 384, 576, 1000};
  for (DType dtype : {DType::QWeightlet, DType::QKQuant, DType::QMixed48, DType::QInt8})
    for (uint32_t dim : dims) {
      for (int b = 1; b <= 8; ++b) check_paths(random_case(rng, 3, dim, b), dtype);  // each width alone
      check_paths(random_case(rng, 17, dim, 0), dtype);                               // a random mix
    }
}

void test_rejects_bad_payloads() {
  std::mt19937 rng(7);
  Case c = random_case(rng, 5, 200, 0);
  auto payload = test::encode_payload(DType::QWeightlet, c.u, c.bits, c.dim);
  CHECK_THROWS(FormatError, "channel data",
               QuantTensor::view(DType::QWeightlet, 5, 200, payload.data(), payload.size() - 1));
  CHECK_THROWS(FormatError, "shorter than its bit-width section", QuantTensor::view(DType::QWeightlet, 5, 200, payload.data(), 10));
  auto padded = payload;
  padded[2] |= 0x80;  // stream bit 23: padding after 5 codes (15 bits)
  CHECK_THROWS(FormatError, "padding bits", QuantTensor::view(DType::QWeightlet, 5, 200, padded.data(), padded.size()));
  padded = payload;
  padded[63] = 1;
  CHECK_THROWS(FormatError, "padding bits", QuantTensor::view(DType::QWeightlet, 5, 200, padded.data(), padded.size()));
  CHECK_THROWS(FormatError, "not a quantized", QuantTensor::view(DType::F32, 5, 200, payload.data(), payload.size()));
  CHECK_THROWS(FormatError, "1 <= C", QuantTensor::view(DType::QWeightlet, 0, 200, payload.data(), payload.size()));
  // a huge channel count from a corrupt shape is refused before any per-channel table is allocated
  CHECK_THROWS(FormatError, "cannot hold", QuantTensor::view(DType::QWeightlet, 1u << 30, 200, payload.data(), payload.size()));
  auto t = QuantTensor::view(DType::QWeightlet, 5, 200, payload.data(), payload.size());
  std::vector<int8_t> out(1000);
  CHECK_THROWS(std::out_of_range, "channel range", unpack(t, 2, 6, out.data()));
}

void test_sizes() {
  CHECK(channel_bytes(DType::QWeightlet, 5, 576) == 4 * 80 + 48);
  CHECK(channel_bytes(DType::QWeightlet, 3, 128) == 48);
  CHECK(channel_bytes(DType::QKQuant, 7, 10) == 5 + 3 + 2);
  CHECK(channel_bytes(DType::QMixed48, 3, 7) == 4);
  CHECK(bits_section_size(1) == 64 && bits_section_size(171) == 128);
}

}  // namespace

int main() {
  test_sizes();
  test_round_trips();
  test_rejects_bad_payloads();
  std::printf("test_unpack: paths scalar%s%s%s, %d failures\n", path_supported(UnpackPath::SSE) ? " sse" : "",
              path_supported(UnpackPath::AVX2) ? " avx2" : "", path_supported(UnpackPath::Neon) ? " neon" : "",
              g_failures);
  return g_failures ? 1 : 0;
}
