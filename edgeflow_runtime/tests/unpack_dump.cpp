// unpack_dump FILE OUT: unpacks every quantized weight of a packed file, in index order, and writes the int8 codes
// back to back to OUT. Lets the Python tests check a native build they cannot load with ctypes (aarch64 under qemu)
// against the Python packer. The unpack path follows EDGEFLOW_UNPACK.
#include <cstdio>
#include <vector>

#include "edgeflow/format.h"
#include "edgeflow/unpack.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s FILE OUT\n", argv[0]);
    return 2;
  }
  try {
    const auto f = edgeflow::PackedFile::open(argv[1]);
    std::FILE* out = std::fopen(argv[2], "wb");
    if (!out) throw std::runtime_error(std::string("cannot write ") + argv[2]);
    for (const auto& t : f.tensors()) {
      if (!edgeflow::is_quantized(t.dtype)) continue;
      std::vector<uint8_t> payload(t.size);
      f.read_tensor(t, payload.data());
      auto q = edgeflow::QuantTensor::view(t, payload.data());
      std::vector<int8_t> codes(uint64_t{q.channels} * q.dim);
      edgeflow::unpack(q, 0, q.channels, codes.data());
      std::fwrite(codes.data(), 1, codes.size(), out);
    }
    std::fclose(out);
    std::printf("%s\n", edgeflow::path_name(edgeflow::active_unpack_path()));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "unpack_dump: %s\n", e.what());
    return 1;
  }
  return 0;
}
