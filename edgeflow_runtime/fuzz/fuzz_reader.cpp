// libFuzzer target: any byte string is either rejected with FormatError or fully read and unpacked; sanitizers
// (address, undefined) catch any out-of-bounds access or overflow on the way. Each input is tried as is and with its
// header and metadata checksums recomputed, so mutations also reach the checks behind the checksums.
#include <cstdint>
#include <cstring>
#include <vector>

#include "edgeflow/format.h"
#include "edgeflow/unpack.h"

namespace {

void read_everything(const uint8_t* data, size_t size) {
  try {
    auto pf = edgeflow::PackedFile::from_memory(data, size);
    for (const auto& r : pf.regions()) {
      std::vector<uint8_t> layer(r.size);
      pf.read_region(r, layer.data(), /*verify_crc=*/false);  // let mutated payloads reach the unpacker
      const auto at = [&](const edgeflow::TensorInfo& t) { return layer.data() + (t.offset - r.offset); };
      for (uint32_t i = r.first_tensor; i < r.first_tensor + r.n_tensors; ++i) {
        const auto& t = pf.tensors()[i];
        if (const auto* crcs = pf.row_crcs_of(t)) {  // same region (open)
          try {
            pf.verify_table_by_rows(t, at(t), at(*crcs));
          } catch (const edgeflow::FormatError&) {  // expected for most mutations: go on to the unpacker
          }
        }
        if (!edgeflow::is_quantized(t.dtype)) continue;
        auto q = edgeflow::QuantTensor::view(t, at(t));
        if (uint64_t{t.shape[0]} * t.shape[1] > (1u << 20)) continue;  // keep memory (and ASan's quarantine) small
        std::vector<int8_t> out(uint64_t{t.shape[0]} * t.shape[1]);
        edgeflow::unpack(q, 0, t.shape[0], out.data());
      }
    }
  } catch (const edgeflow::FormatError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  read_everything(data, size);
  if (size < edgeflow::kHeaderSize) return 0;
  std::vector<uint8_t> sealed(data, data + size);
  uint64_t meta_size;
  std::memcpy(&meta_size, sealed.data() + 32, 8);
  if (meta_size <= size - edgeflow::kHeaderSize) {
    const uint32_t crc = edgeflow::crc32(sealed.data() + edgeflow::kHeaderSize, meta_size);
    std::memcpy(sealed.data() + 40, &crc, 4);
  }
  const uint32_t crc = edgeflow::crc32(sealed.data(), 60);
  std::memcpy(sealed.data() + 60, &crc, 4);
  read_everything(sealed.data(), sealed.size());
  return 0;
}
