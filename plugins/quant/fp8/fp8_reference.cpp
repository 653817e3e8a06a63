// Reference conversions of the FP8 formats: e4m3 to and from float, rows, and the damage check (--check-tensors).
#include "fp8_formats.hpp"

#include <algorithm>
#include <cmath>

namespace strata::fp8 {

const format *find_format(uint32_t type) {
    for (const format &f : formats)
        if (f.type == type) return &f;
    return nullptr;
}

float e4m3_to_float(uint8_t q) {
    const int exponent = (q >> 3) & 0xf, mantissa = q & 7;
    float v;
    if (exponent == 0xf && mantissa == 7) v = NAN;
    else if (exponent == 0) v = std::ldexp(static_cast<float>(mantissa), -9); // subnormal: m / 8 * 2^-6
    else v = std::ldexp(static_cast<float>(8 + mantissa), exponent - 10);     // (1 + m / 8) * 2^(e - 7)
    return (q & 0x80) ? -v : v;
}

uint8_t float_to_e4m3(float v) {
    if (std::isnan(v)) return 0x7f;
    const uint8_t sign = std::signbit(v) ? 0x80 : 0;
    const float a = std::fabs(v);
    if (a >= 448.0f) return sign | 0x7e;
    uint32_t code;
    if (a < 0x1p-6f) {
        code = static_cast<uint32_t>(std::nearbyint(a * 512.0f)); // units of 2^-9; 8 is the smallest normal
    } else {
        int e = 0;
        std::frexp(a, &e); // a = f * 2^e, f in [0.5, 1)
        const int exponent = e - 1;   // a = (1 + m) * 2^exponent
        const float steps = std::ldexp(a, 3 - exponent) - 8.0f; // mantissa in eighths, in [0, 8)
        code = static_cast<uint32_t>((exponent + 7) << 3) + static_cast<uint32_t>(std::nearbyint(steps));
    }
    return static_cast<uint8_t>(sign | std::min<uint32_t>(code, 0x7e)); // a carry into 0x7f saturates to 448
}

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
