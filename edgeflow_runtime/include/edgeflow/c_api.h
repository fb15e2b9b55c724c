/* C ABI of libedgeflow.so (used by the Python harness through ctypes): the packed-file reader and unpack kernels here,
 * the inference engine in engine.h. Functions returning int give 0 on success and -1 on error, functions returning a
 * handle give NULL on error; ef_last_error() then describes the error (thread-local, valid until the next call on
 * that thread). No exception or abort crosses the ABI on bad input. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ef_file ef_file;

typedef struct {
  const char* name; /* NUL-terminated, valid while the file is open */
  uint32_t dtype, ndim;
  uint32_t shape[4];
  uint32_t region;
  uint32_t crc32;
  uint64_t offset, size;
} ef_tensor_info;

typedef struct {
  uint32_t kind, layer; /* kind: 0 embedding, 1 layer, 2 final */
  uint64_t offset, size;
  uint32_t first_tensor, n_tensors;
} ef_region_info;

const char* ef_last_error(void);

ef_file* ef_open(const char* path);                       /* NULL on error */
ef_file* ef_open_memory(const void* data, uint64_t size); /* data must outlive the handle; NULL on error */
void ef_close(ef_file* f);

uint32_t ef_num_tensors(const ef_file* f);
uint32_t ef_num_regions(const ef_file* f);
int ef_tensor_info_at(const ef_file* f, uint32_t i, ef_tensor_info* out);
int ef_region_info_at(const ef_file* f, uint32_t i, ef_region_info* out);
int64_t ef_find_tensor(const ef_file* f, const char* name); /* index, or -1 */
int ef_read_tensor(const ef_file* f, uint32_t i, void* dst, uint64_t cap, int verify_crc);
int ef_read_region(const ef_file* f, uint32_t i, void* dst, uint64_t cap, int verify_crc);
/* Unpacks channels [c0, c1) of quantized tensor i, whose payload the caller read into `payload`. */
int ef_unpack_tensor(const ef_file* f, uint32_t i, const void* payload, uint32_t c0, uint32_t c1, int8_t* out);
/* Same without a file: dtype 16..19, shape [channels, dim]. */
int ef_unpack_payload(uint32_t dtype, uint32_t channels, uint32_t dim, const void* payload, uint64_t size,
                      uint32_t c0, uint32_t c1, int8_t* out);

/* "auto", "scalar", "sse", "avx2", "neon". */
int ef_set_unpack_path(const char* name);
const char* ef_unpack_path(void);
int ef_unpack_path_supported(const char* name);

#ifdef __cplusplus
}
#endif
