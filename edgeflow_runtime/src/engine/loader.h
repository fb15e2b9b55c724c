// Opening a packed model file (docs/format.md) as the engine's WeightSource.
#pragma once
#include <memory>
#include <string>

#include "pipeline.h"

namespace edgeflow {

struct LoadOptions {
    bool direct_io = false;   // O_DIRECT reads into aligned buffers (bypasses the page cache)
    bool verify_crc = true;   // check every payload's CRC-32 while unpacking
};

std::unique_ptr<WeightSource> open_packed_model(const std::string& path, LoadOptions opt = {});

}  // namespace edgeflow
