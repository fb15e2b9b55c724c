// The native reader on a small file built in memory from docs/format.md: valid files parse and read back; corrupt
// or truncated ones are rejected with a FormatError naming the problem.
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "check.h"
#include "edgeflow/format.h"
#include "edgeflow/unpack.h"
#include "encode.h"

using namespace edgeflow;

namespace {

template <class T>
void put(std::vector<uint8_t>& b, size_t at, T v) {
  std::memcpy(b.data() + at, &v, sizeof v);
}

constexpr size_t kMeta = 64, kRegions = kMeta + 64, kTensors = kRegions + 32;
const char* kNames[2] = {"model.layers.0.input_layernorm.weight", "model.layers.0.mlp.up_proj.weight"};

// One layer region holding an F32 [4] norm and a 5-bit-mix weightlet [6, 200] weight.
struct Built {
  std::vector<uint8_t> file;
  std::vector<int8_t> q;
};

Built build() {
  std::mt19937 rng(3);
  std::vector<uint8_t> bits = {1, 3, 5, 7, 8, 2}, u;
  std::vector<int8_t> q;
  for (uint8_t b : bits)
    for (int j = 0; j < 200; ++j) {
      u.push_back(static_cast<uint8_t>(rng() % (1u << b)));
      q.push_back(static_cast<int8_t>(u.back() - (1 << (b - 1))));
    }
  const auto weight = test::encode_payload(DType::QWeightlet, u, bits, 200);
  const float norm[4] = {1.f, 2.f, 3.f, 4.f};
  const std::string strings = std::string(kNames[0]) + kNames[1], json = "{}";
  const size_t meta_size = 64 + 32 + 2 * 64 + strings.size() + json.size();
  const uint64_t region = 4096, t0 = region, t1 = region + 64;
  const uint64_t region_size = (t1 + weight.size() - region + 4095) / 4096 * 4096;
  std::vector<uint8_t> f(region + region_size, 0);
  // config block: hidden 4, 1 layer
  put<uint32_t>(f, kMeta + 0, 4);
  put<uint32_t>(f, kMeta + 8, 1);
  put<float>(f, kMeta + 32, 1e-5f);
  put<uint32_t>(f, kMeta + 44, static_cast<uint32_t>(strings.size()));
  put<uint32_t>(f, kMeta + 48, static_cast<uint32_t>(json.size()));
  // region 0: layer 0, tensors 0..1
  put<uint32_t>(f, kRegions + 0, 1);
  put<uint64_t>(f, kRegions + 8, region);
  put<uint64_t>(f, kRegions + 16, region_size);
  put<uint32_t>(f, kRegions + 28, 2);
  // tensors
  const uint64_t offs[2] = {t0, t1}, sizes[2] = {sizeof norm, weight.size()};
  const uint32_t name_off[2] = {0, static_cast<uint32_t>(std::strlen(kNames[0]))};
  std::memcpy(f.data() + t0, norm, sizeof norm);
  std::memcpy(f.data() + t1, weight.data(), weight.size());
  for (int i = 0; i < 2; ++i) {
    const size_t r = kTensors + 64 * i;
    put<uint32_t>(f, r + 0, name_off[i]);
    put<uint32_t>(f, r + 4, static_cast<uint32_t>(std::strlen(kNames[i])));
    f[r + 8] = i == 0 ? 1 : 16;
    f[r + 9] = i == 0 ? 1 : 2;
    put<uint32_t>(f, r + 16, i == 0 ? 4 : 6);
    put<uint32_t>(f, r + 20, i == 0 ? 0 : 200);
    put<uint64_t>(f, r + 32, offs[i]);
    put<uint64_t>(f, r + 40, sizes[i]);
    put<uint32_t>(f, r + 48, crc32(f.data() + offs[i], sizes[i]));
  }
  std::memcpy(f.data() + kTensors + 128, strings.data(), strings.size());
  std::memcpy(f.data() + kTensors + 128 + strings.size(), json.data(), json.size());
  // header
  std::memcpy(f.data(), kMagic, 8);
  put<uint32_t>(f, 8, kVersion);
  put<uint32_t>(f, 12, 64);
  put<uint64_t>(f, 16, f.size());
  put<uint64_t>(f, 24, 64);
  put<uint64_t>(f, 32, meta_size);
  put<uint32_t>(f, 40, crc32(f.data() + 64, meta_size));
  put<uint32_t>(f, 44, 4096);
  put<uint32_t>(f, 48, 1);
  put<uint32_t>(f, 52, 2);
  put<uint32_t>(f, 56, 16);
  put<uint32_t>(f, 60, crc32(f.data(), 60));
  return {f, q};
}

// Re-seals the checksums after an edit, so the check under test is the one that fires.
void reseal(std::vector<uint8_t>& f) {
  uint64_t meta_size;
  std::memcpy(&meta_size, f.data() + 32, 8);
  if (64 + meta_size <= f.size()) put<uint32_t>(f, 40, crc32(f.data() + 64, meta_size));
  put<uint32_t>(f, 60, crc32(f.data(), 60));
}

void read_all(const std::vector<uint8_t>& f) {
  auto pf = PackedFile::from_memory(f.data(), f.size());
  for (const auto& t : pf.tensors()) {
    std::vector<uint8_t> buf(t.size);
    pf.read_tensor(t, buf.data());
    if (is_quantized(t.dtype)) {
      auto qt = QuantTensor::view(t, buf.data());
      std::vector<int8_t> out(uint64_t{t.shape[0]} * t.shape[1]);
      unpack(qt, 0, t.shape[0], out.data());
    }
  }
}

void test_valid_file() {
  Built b = build();
  auto pf = PackedFile::from_memory(b.file.data(), b.file.size());
  CHECK(pf.tensors().size() == 2 && pf.regions().size() == 1 && pf.config().hidden_size == 4);
  const RegionInfo* r = pf.layer_region(0);
  CHECK(r && r->offset == 4096 && r->size % 4096 == 0);
  std::vector<uint8_t> layer(r->size);
  pf.read_region(*r, layer.data());
  float norm[4];
  std::memcpy(norm, layer.data() + (pf.at(kNames[0]).offset - r->offset), sizeof norm);
  CHECK(norm[3] == 4.f);
  const TensorInfo& w = pf.at(kNames[1]);
  auto qt = QuantTensor::view(w, layer.data() + (w.offset - r->offset));
  std::vector<int8_t> out(6 * 200);
  unpack(qt, 0, 6, out.data());
  CHECK(std::memcmp(out.data(), b.q.data(), out.size()) == 0);
  CHECK(pf.find("nope") == nullptr);
}

void test_corruptions() {
  const Built b = build();
  auto edit = [&](auto fn, bool seal) {
    auto f = b.file;
    fn(f);
    if (seal) reseal(f);
    return f;
  };
  const size_t w = kTensors + 64;  // the weight's record
  CHECK_THROWS(FormatError, "bad magic", read_all(edit([](auto& f) { f[0] = 'G'; }, false)));
  CHECK_THROWS(FormatError, "version 5", read_all(edit([](auto& f) { put<uint32_t>(f, 8, 5); }, true)));
  CHECK_THROWS(FormatError, "version 0", read_all(edit([](auto& f) { put<uint32_t>(f, 8, 0); }, true)));
  read_all(edit([](auto& f) { put<uint32_t>(f, 8, 1); }, true));  // versions 1 to 3 are still read
  read_all(edit([](auto& f) { put<uint32_t>(f, 8, 2); }, true));
  read_all(edit([](auto& f) { put<uint32_t>(f, 8, 3); }, true));
  // A linear's numerics (P.out_step, P.act_bits) came with version 3: the norm's name, same length, made one
  auto numerics = [&](uint32_t version) {
    return edit([version](auto& f) {
      const size_t name = kTensors + 128 + std::strlen(kNames[0]) - std::strlen(".out_step");
      std::memcpy(f.data() + name, ".out_step", std::strlen(".out_step"));
      put<uint32_t>(f, 8, version);
    }, true);
  };
  read_all(numerics(3));
  CHECK_THROWS(FormatError, "need format version 3, the file is version 2", read_all(numerics(2)));
  CHECK_THROWS(FormatError, "header checksum", read_all(edit([](auto& f) { f[20] ^= 1; }, false)));
  CHECK_THROWS(FormatError, "metadata checksum", read_all(edit([](auto& f) { f[kMeta + 3] ^= 1; }, false)));
  CHECK_THROWS(FormatError, "truncated", read_all(std::vector<uint8_t>(b.file.begin(), b.file.begin() + 30)));
  CHECK_THROWS(FormatError, "truncated", read_all(std::vector<uint8_t>(b.file.begin(), b.file.end() - 4096)));
  CHECK_THROWS(FormatError, "outside its region",
               read_all(edit([&](auto& f) { put<uint64_t>(f, w + 32, f.size() + 64); }, true)));
  CHECK_THROWS(FormatError, "outside its region",
               read_all(edit([&](auto& f) { put<uint64_t>(f, w + 40, ~uint64_t{0} - 10); }, true)));
  CHECK_THROWS(FormatError, "past the end",
               read_all(edit([&](auto& f) { put<uint64_t>(f, kRegions + 16, 1ull << 40); }, true)));
  CHECK_THROWS(FormatError, "unknown dtype", read_all(edit([&](auto& f) { f[w + 8] = 99; }, true)));
  CHECK_THROWS(FormatError, "shape overflows", read_all(edit([&](auto& f) {
                 f[kTensors + 9] = 4;
                 for (int d = 0; d < 4; ++d) put<uint32_t>(f, kTensors + 16 + 4 * d, 0xFFFFFFFFu);
               }, true)));
  CHECK_THROWS(FormatError, "checksum mismatch", read_all(edit([&](auto& f) { f[4096 + 64 + 100] ^= 4; }, false)));
  CHECK_THROWS(FormatError, "name outside", read_all(edit([&](auto& f) { put<uint32_t>(f, w + 4, 5000); }, true)));
  CHECK_THROWS(FormatError, "appears twice", read_all(edit([&](auto& f) {
                 put<uint32_t>(f, w + 0, 0);
                 put<uint32_t>(f, w + 4, static_cast<uint32_t>(std::strlen(kNames[0])));
               }, true)));
  // a bit-width code's padding set, with the payload checksum resealed: caught when the weight is viewed
  CHECK_THROWS(FormatError, "padding bits", read_all(edit([&](auto& f) {
                 f[4096 + 64 + 5] = 0x01;
                 uint64_t size;
                 std::memcpy(&size, f.data() + w + 40, 8);
                 put<uint32_t>(f, w + 48, crc32(f.data() + 4096 + 64, size));
               }, true)));
  CHECK_THROWS(FormatError, "cannot open", PackedFile::open("/nonexistent/model.efpk"));
}

// Crc32Shift and SplitCrc against crc32 of the whole: every split point, lengths 0 to 3 pieces and odd tails.
void test_crc_combination() {
  std::vector<uint8_t> data(3 * SplitCrc::kPiece + 777);
  uint32_t x = 12345;
  for (auto& b : data) b = uint8_t((x = x * 1103515245u + 12345u) >> 24);
  for (size_t split : {size_t(0), size_t(1), size_t(7), size_t(4096), size_t(65537)}) {
    const size_t n = 100003;
    CHECK((Crc32Shift(n - split)(crc32(data.data(), split)) ^ crc32(data.data() + split, n - split)) ==
          crc32(data.data(), n));
  }
  for (uint64_t size : {uint64_t(0), uint64_t(1), SplitCrc::kPiece - 1, SplitCrc::kPiece, SplitCrc::kPiece + 1,
                        uint64_t(data.size())}) {
    std::vector<uint32_t> pieces(SplitCrc::pieces(size));
    for (size_t k = 0; k < pieces.size(); ++k) pieces[k] = SplitCrc::piece(data.data(), size, k);
    CHECK(SplitCrc::combine(pieces, size) == crc32(data.data(), size));
  }
}

// Every CRC-32 kernel this CPU runs equals the table kernel on every length up to several 64-byte folds (the folding
// kernel's paths: under 64 bytes, whole folds, 16-byte folds, tails of 1-15), at every alignment, over long buffers,
// chained across calls, and on zlib's check value.
void test_crc_kernels() {
  std::vector<uint8_t> data(200000 + 16);
  uint32_t x = 777;
  for (auto& b : data) b = uint8_t((x = x * 1103515245u + 12345u) >> 24);
  const Crc32Kernel table = crc32_kernels().front();
  CHECK(std::string(table.name) == "table");
  std::string names;
  for (const Crc32Kernel& k : crc32_kernels()) {
    names += std::string(" ") + k.name;
    CHECK(crc32_with(k, "123456789", 9) == 0xCBF43926u);
    for (size_t off = 0; off < 16; ++off)
      for (size_t n = 0; n <= 400; ++n)
        CHECK(crc32_with(k, data.data() + off, n, 0x1234u * uint32_t(off)) ==
              crc32_with(table, data.data() + off, n, 0x1234u * uint32_t(off)));
    for (size_t n : {size_t(4096), size_t(65536 + 13), size_t(200000)})
      CHECK(crc32_with(k, data.data() + 3, n) == crc32_with(table, data.data() + 3, n));
    const uint32_t head = crc32_with(k, data.data(), 1000);
    CHECK(crc32_with(k, data.data() + 1000, 5077, head) == crc32_with(table, data.data(), 6077));
  }
  if (!std::getenv("EDGEFLOW_CRC32")) CHECK(std::string(crc32_kernel().name) == crc32_kernels().back().name);
  std::printf("test_format: CRC-32 kernels:%s\n", names.c_str());
}

}  // namespace

int main() {
  test_valid_file();
  test_corruptions();
  test_crc_combination();
  test_crc_kernels();
  std::printf("test_format: %d failures\n", g_failures);
  return g_failures ? 1 : 0;
}
