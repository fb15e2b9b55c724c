// exp_approx (exp_approx.h) on a whole GCC/Clang vector of floats: VF a vector_size type of floats, VI the int32
// vector of the same lane count. Used by the tiled attention kernels (attention_tiled.h) and by silu_mul (ops.cpp),
// where the scalar function does not auto-vectorize (GCC turns its clamps into branches).
#pragma once
#include <cstdint>
#include <cstring>

namespace edgeflow {

// flush_low: inputs below -87.33 give exactly 0 instead of exp(-87.33) (the attention kernels' masked scores).
// Always inlined, so a wide vector never crosses a call in a function compiled for a narrower ISA (a target_clones
// default clone): no ABI question, which is why -Wpsabi is quiet here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
template <class VF, class VI, bool flush_low>
__attribute__((always_inline)) inline VF vexp_approx(VF x) {
    const VF lo = VF{} - 87.33f, hi = VF{} + 88.37f;
    VF xc = x < hi ? x : hi;
    xc = xc > lo ? xc : lo;
    const VF y = xc * 1.44269504088896341f + 0.5f;
    VF n = __builtin_convertvector(__builtin_convertvector(y, VI), VF);  // truncation ...
    n = n > y ? n - 1.f : n;                                              // ... made floor
    const VF r = xc - n * 0.693359375f + n * 2.12194440e-4f;
    VF p = VF{} + 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.f;
    const VI bits = (__builtin_convertvector(n, VI) + 127) << 23;
    VF scale;
    std::memcpy(&scale, &bits, sizeof scale);
    const VF e = p * scale;
    if constexpr (flush_low) return x < lo ? VF{} : e;
    return e;
}
#pragma GCC diagnostic pop

}  // namespace edgeflow
