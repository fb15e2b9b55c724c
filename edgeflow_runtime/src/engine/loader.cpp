#include "loader.h"
namespace edgeflow {
// Placeholder until the packed-file reader (branch pack) is merged.
std::unique_ptr<WeightSource> open_packed_model(const std::string& path, LoadOptions) {
    throw EngineError("cannot open " + path + ": packed-file support is not built yet");
}
}  // namespace edgeflow
