// The C ABI of the packed-file reader and the unpack kernels (include/edgeflow/c_api.h); errors: guarded.h.
#include <cstring>
#include <stdexcept>
#include <string>

#include "edgeflow/c_api.h"
#include "edgeflow/format.h"
#include "edgeflow/unpack.h"
#include "guarded.h"

using edgeflow::capi::guarded;

struct ef_file {
  edgeflow::PackedFile file;
};

namespace {

edgeflow::UnpackPath path_from(const char* name) {
  for (auto p : {edgeflow::UnpackPath::Auto, edgeflow::UnpackPath::Scalar, edgeflow::UnpackPath::SSE,
                 edgeflow::UnpackPath::AVX2, edgeflow::UnpackPath::Neon})
    if (name && std::strcmp(name, edgeflow::path_name(p)) == 0) return p;
  throw std::invalid_argument(std::string("unknown unpack path ") + (name ? name : "(null)"));
}

const edgeflow::TensorInfo& tensor(const ef_file* f, uint32_t i) {
  if (i >= f->file.tensors().size()) throw std::out_of_range("tensor index out of range");
  return f->file.tensors()[i];
}

}  // namespace

extern "C" {

const char* ef_last_error(void) { return edgeflow::capi::last_error().c_str(); }

ef_file* ef_open(const char* path) {
  ef_file* out = nullptr;
  guarded([&] { out = new ef_file{edgeflow::PackedFile::open(path ? path : "")}; });
  return out;
}

ef_file* ef_open_memory(const void* data, uint64_t size) {
  ef_file* out = nullptr;
  guarded([&] { out = new ef_file{edgeflow::PackedFile::from_memory(static_cast<const uint8_t*>(data), size)}; });
  return out;
}

void ef_close(ef_file* f) { delete f; }

uint32_t ef_num_tensors(const ef_file* f) { return static_cast<uint32_t>(f->file.tensors().size()); }
uint32_t ef_num_regions(const ef_file* f) { return static_cast<uint32_t>(f->file.regions().size()); }

int ef_tensor_info_at(const ef_file* f, uint32_t i, ef_tensor_info* out) {
  return guarded([&] {
    const auto& t = tensor(f, i);
    out->name = t.name.c_str();
    out->dtype = static_cast<uint32_t>(t.dtype);
    out->ndim = t.ndim;
    std::memcpy(out->shape, t.shape, sizeof out->shape);
    out->region = t.region;
    out->crc32 = t.crc32;
    out->offset = t.offset;
    out->size = t.size;
  });
}

int ef_region_info_at(const ef_file* f, uint32_t i, ef_region_info* out) {
  return guarded([&] {
    if (i >= f->file.regions().size()) throw std::out_of_range("region index out of range");
    const auto& r = f->file.regions()[i];
    *out = {static_cast<uint32_t>(r.kind), r.layer, r.offset, r.size, r.first_tensor, r.n_tensors};
  });
}

int64_t ef_find_tensor(const ef_file* f, const char* name) {
  const auto* t = f->file.find(name ? name : "");
  return t ? t - f->file.tensors().data() : -1;
}

int ef_read_tensor(const ef_file* f, uint32_t i, void* dst, uint64_t cap, int verify_crc) {
  return guarded([&] {
    const auto& t = tensor(f, i);
    if (cap < t.size) throw std::length_error("destination smaller than the tensor");
    f->file.read_tensor(t, dst, verify_crc != 0);
  });
}

int ef_read_region(const ef_file* f, uint32_t i, void* dst, uint64_t cap, int verify_crc) {
  return guarded([&] {
    if (i >= f->file.regions().size()) throw std::out_of_range("region index out of range");
    const auto& r = f->file.regions()[i];
    if (cap < r.size) throw std::length_error("destination smaller than the region");
    f->file.read_region(r, dst, verify_crc != 0);
  });
}

int ef_unpack_tensor(const ef_file* f, uint32_t i, const void* payload, uint32_t c0, uint32_t c1, int8_t* out) {
  return guarded([&] {
    auto q = edgeflow::QuantTensor::view(tensor(f, i), static_cast<const uint8_t*>(payload));
    edgeflow::unpack(q, c0, c1, out);
  });
}

int ef_unpack_payload(uint32_t dtype, uint32_t channels, uint32_t dim, const void* payload, uint64_t size,
                      uint32_t c0, uint32_t c1, int8_t* out) {
  return guarded([&] {
    auto q = edgeflow::QuantTensor::view(static_cast<edgeflow::DType>(dtype), channels, dim,
                                         static_cast<const uint8_t*>(payload), size);
    edgeflow::unpack(q, c0, c1, out);
  });
}

int ef_set_unpack_path(const char* name) { return guarded([&] { edgeflow::set_unpack_path(path_from(name)); }); }

const char* ef_unpack_path(void) {
  const char* name = "scalar";
  guarded([&] { name = edgeflow::path_name(edgeflow::active_unpack_path()); });
  return name;
}

int ef_unpack_path_supported(const char* name) {
  int ok = 0;
  guarded([&] { ok = edgeflow::path_supported(path_from(name)) ? 1 : 0; });
  return ok;
}

}  // extern "C"
