// Reference conversions of the FP8 formats: e4m3 to and from float, rows, and the damage check (--check-tensors).
#include "fp8_formats.hpp"

#include <strata/float8.hpp>

#include <algorithm>
#include <cmath>

namespace strata::fp8 {

const format *find_format(uint32_t type) {
    for (const format &f : formats)
        if (f.type == type) return &f;
    return nullptr;
}

float e4m3_to_float(uint8_t q) { return float8::e4m3_to_fp32(q); }

uint8_t float_to_e4m3(float v) { return float8::fp32_to_e4m3(v); }

void dequantize_row(const format &f, const void *src, float *dst, int64_t n) {
    const auto *b = static_cast<const uint8_t *>(src);
    for (int64_t g = 0; g < n / f.block; ++g, b += f.block_bytes()) {
        const float s = block_scale(b);
        for (int i = 0; i < f.block; ++i) dst[g * f.block + i] = s * e4m3_to_float(b[4 + i]);
    }
}

void quantize_row(const format &f, const float *src, void *dst, int64_t n) {
    auto *b = static_cast<uint8_t *>(dst);
    for (int64_t g = 0; g < n / f.block; ++g, b += f.block_bytes()) {
        const float *x = src + g * f.block;
        float amax = 0.0f;
        for (int i = 0; i < f.block; ++i) amax = std::max(amax, std::fabs(x[i]));
        const float s = amax > 0.0f ? amax / 448.0f : 1.0f;
        std::memcpy(b, &s, sizeof s);
        for (int i = 0; i < f.block; ++i) b[4 + i] = float_to_e4m3(x[i] / s);
    }
}

int64_t find_nonfinite(const format &f, const void *row, int64_t n) {
    const auto *b = static_cast<const uint8_t *>(row);
    for (int64_t g = 0; g < n / f.block; ++g, b += f.block_bytes()) {
        if (!std::isfinite(block_scale(b))) return g * f.block;
        for (int i = 0; i < f.block; ++i)
            if ((b[4 + i] & 0x7f) == 0x7f) return g * f.block;
    }
    return -1;
}

} // namespace strata::fp8
