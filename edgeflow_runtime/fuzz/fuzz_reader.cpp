// libFuzzer target: any byte string is either rejected with FormatError or fully read and unpacked; sanitizers
// (address, undefined) catch any out-of-bounds access or overflow on the way.
#include <cstdint>
#include <vector>

#include "edgeflow/format.h"
#include "edgeflow/unpack.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto pf = edgeflow::PackedFile::from_memory(data, size);
    for (const auto& r : pf.regions()) {
      std::vector<uint8_t> layer(r.size);
      pf.read_region(r, layer.data(), /*verify_crc=*/false);  // crc off: let mutated payloads reach the unpacker
      for (uint32_t i = r.first_tensor; i < r.first_tensor + r.n_tensors; ++i) {
        const auto& t = pf.tensors()[i];
        if (!edgeflow::is_quantized(t.dtype)) continue;
        auto q = edgeflow::QuantTensor::view(t, layer.data() + (t.offset - r.offset));
        if (uint64_t{t.shape[0]} * t.shape[1] > (1u << 22)) continue;  // keep memory bounded
        std::vector<int8_t> out(uint64_t{t.shape[0]} * t.shape[1]);
        edgeflow::unpack(q, 0, t.shape[0], out.data());
      }
    }
  } catch (const edgeflow::FormatError&) {
  }
  return 0;
}
