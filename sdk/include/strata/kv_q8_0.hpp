// The q8_0 KV cache's storage (ABI 1.23, STRATA_KV_Q8_0): llama.cpp's block_q8_0, 32 values as one binary16 scale d
// and 32 signed bytes q, value i = d * q[i] (exact in float32: an 11-bit significand times at most 8 bits).
// Quantized as ggml's quantize_row_q8_0_ref does (d = amax / 127 rounded to a half, q[i] = roundf(x[i] / d) with the
// float d), so a cache row holds the bits llama.cpp's reference quantizer writes. A group with a NaN or an infinity
// has no finite scale: it is stored as a NaN d and zero bytes, so every value of it reads back as NaN (the reference
// would convert NaN to int8, which is undefined). Header-only, for the host, plugins and CUDA device code alike.
#pragma once

#include <strata/float16.hpp>

#include <cmath>
#include <cstdint>

namespace strata::kv_q8_0 {

constexpr int group_values = 32;

struct group {
    uint16_t d; // binary16 bits
    int8_t q[group_values];
};
static_assert(sizeof(group) == 34, "a q8_0 group is ggml's block_q8_0: 2 + 32 bytes");

// Values per element of a KV row pointer: 1 for a device's one-value element types, group_values for a group.
template <class E> inline constexpr int64_t values_per_element = 1;
template <> inline constexpr int64_t values_per_element<group> = group_values;

// Value i of a group, exactly.
STRATA_FLOAT16_FN float value(const group &g, int i) {
    return float16::fp16_to_fp32(g.d) * static_cast<float>(g.q[i]);
}

// Quantizes 32 floats into *out.
STRATA_FLOAT16_FN void quantize(const float *x, group *out) {
    float amax = 0.0f;
    bool finite = true;
    for (int i = 0; i < group_values; ++i) {
        const float a = fabsf(x[i]);
        finite = finite && a <= 3.402823466e38f; // false for inf and NaN
        amax = a > amax ? a : amax;
    }
    if (!finite) {
        out->d = 0x7e00; // a quiet NaN
        for (int i = 0; i < group_values; ++i) out->q[i] = 0;
        return;
    }
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    out->d = float16::fp32_to_fp16(d);
    for (int i = 0; i < group_values; ++i) {
        // |x * id| <= 127 up to rounding; the clamp only keeps the conversion defined where id overflowed (a d in
        // float32's subnormal range, whose half is 0 anyway: such a group reads back as zeros).
        const float r = roundf(x[i] * id);
        out->q[i] = static_cast<int8_t>(r >= 127.0f ? 127.0f : (r <= -127.0f ? -127.0f : (r == r ? r : 0.0f)));
    }
}

} // namespace strata::kv_q8_0
