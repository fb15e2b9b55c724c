// Opening a packed model file (docs/format.md) as the engine's WeightSource.
#pragma once
#include <memory>
#include <string>

#include "pipeline.h"

namespace edgeflow {

// How the packed file is read. Auto: with O_DIRECT (the disk's DMA lands in the engine's buffers: the reader thread
// spends no CPU copying out of the page cache, and its reads cannot be slowed by the kernel's page-cache work) when
// no byte of the file is in the page cache, as in a cold start; buffered when some is (pages already there are used:
// Figure 2's preloaded runs) or when the filesystem refuses O_DIRECT (tmpfs).
enum class IoMode { Auto, Direct, Buffered };

struct LoadOptions {
    IoMode io = IoMode::Auto;
    bool verify_crc = true;   // check every payload's CRC-32 while unpacking
    bool float_outputs = false;  // ignore the file's output grids: the CPU-only lane, which no NPU computes
};

std::unique_ptr<WeightSource> open_packed_model(const std::string& path, LoadOptions opt = {});

// Bytes of the file in the page cache now (mincore over a read-only mapping); -1 if that cannot be told.
long resident_bytes(const std::string& path);

}  // namespace edgeflow
