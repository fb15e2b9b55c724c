// exp(x) for float32 without a library call, shared by the scalar operators (ops.cpp) and the attention reference,
// so that loops over it vectorize. The tiled attention kernels (attention_tiled.h) evaluate the same polynomial on
// whole vectors.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

namespace edgeflow {

// x = n ln2 + r with |r| <= ln2 / 2, exp(r) by the Cephes expf polynomial (relative error ~1e-7, like expf), 2^n
// through the exponent bits. Inputs are clamped to [-87.33, 88.37] (exp(-87.33) ~ FLT_MIN keeps 2^n normal).
__attribute__((always_inline)) inline float exp_approx(float x) {
    x = x < 88.37f ? x : 88.37f;
    x = x > -87.33f ? x : -87.33f;
    // n = floor(y), written as truncation plus a correction because GCC does not vectorize floorf (|y| < 2^31 here).
    const float y = x * 1.44269504088896341f + 0.5f;
    float n = float(int32_t(y));
    n = n > y ? n - 1.f : n;
    const float r = x - n * 0.693359375f + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.f;
    const int32_t bits = (int32_t(n) + 127) << 23;
    float scale;
    std::memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

}  // namespace edgeflow
