// The one rule every kernel list follows (GEMM, GEMM16, attention, LM head, unpack): a list of the kernels this CPU
// can run, ordered from the reference to the best, and the best taken unless an environment variable names another.
#pragma once
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace edgeflow {

// The last kernel of `ks` (each with a `name`), or the one the environment variable `env` names; a name this CPU
// cannot run is an error listing the ones it can.
template <class K>
K choose_kernel(const std::vector<K>& ks, const char* env) {
    const char* want = std::getenv(env);
    if (!want || !*want) return ks.back();
    std::string names;
    for (const auto& k : ks) {
        if (std::strcmp(k.name, want) == 0) return k;
        names += std::string(" ") + k.name;
    }
    throw std::invalid_argument(std::string(env) + "=" + want + " is not a kernel this CPU can run (available:" +
                                names + ")");
}

}  // namespace edgeflow
