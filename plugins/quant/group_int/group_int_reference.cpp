// Reference conversions of the group-integer formats and the scale check (--check-tensors).
#include "group_int_formats.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>

namespace strata::group_int {

namespace {

// Float to IEEE half, round to nearest even (for quantize_row's scales).
uint16_t float_to_half(float v) {
    uint32_t x;
    std::memcpy(&x, &v, sizeof x);
    const uint32_t sign = (x >> 16) & 0x8000u;
    const uint32_t abs = x & 0x7fffffffu;
    if (abs >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
    if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u); // rounds past 65504
    if (abs < 0x38800000u) { // subnormal half (or zero)
        const float m = std::fabs(v) * 16777216.0f; // 2^24: units of the smallest subnormal
        return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(m)));
    }
    const uint32_t mant = abs & 0x7fffffu;
    uint32_t h = ((abs >> 23) - 112u) << 10 | (mant >> 13);
    const uint32_t rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
}

} // namespace

const format *find_format(uint32_t type) {
    for (const format &f : formats)
        if (f.type == type) return &f;
    return nullptr;
}

void dequantize_row(const format &f, const void *src, float *dst, int64_t n) {
    const auto *b = static_cast<const uint8_t *>(src);
    for (int64_t g = 0; g < n / f.group; ++g, b += f.block_bytes()) {
        const float s = block_scale(b);
        const float z = static_cast<float>(block_zero(b));
        for (int i = 0; i < f.group; ++i) dst[g * f.group + i] = s * (static_cast<float>(block_q(f, b, i)) - z);
    }
}

void quantize_row(const format &f, const float *src, void *dst, int64_t n) {
    auto *b = static_cast<uint8_t *>(dst);
    const int qmax = (1 << f.bits) - 1;
    for (int64_t g = 0; g < n / f.group; ++g, b += f.block_bytes()) {
        const float *x = src + g * f.group;
        float lo = std::min(0.0f, *std::min_element(x, x + f.group));
        float hi = std::max(0.0f, *std::max_element(x, x + f.group));
        const uint16_t scale_h = float_to_half(hi > lo ? (hi - lo) / static_cast<float>(qmax) : 1.0f);
        const float s = fp16_to_fp32(scale_h);
        const int zero = std::clamp(static_cast<int>(std::nearbyint(-lo / s)), 0, qmax);
        std::memcpy(b, &scale_h, 2);
        b[2] = static_cast<uint8_t>(zero);
        b[3] = 0;
        uint8_t *qs = b + 4;
        if (f.bits == 4) std::fill(qs, qs + f.group / 2, uint8_t{0});
        for (int i = 0; i < f.group; ++i) {
            const int q = std::clamp(static_cast<int>(std::nearbyint(x[i] / s)) + zero, 0, qmax);
            if (f.bits == 8) {
                qs[i] = static_cast<uint8_t>(q);
            } else {
                const int chunk = i / 32, j = i % 32;
                qs[chunk * 16 + j % 16] |= static_cast<uint8_t>(j < 16 ? q : q << 4);
            }
        }
    }
}

int64_t find_nonfinite(const format &f, const void *row, int64_t n) {
    const auto *b = static_cast<const uint8_t *>(row);
    for (int64_t g = 0; g < n / f.group; ++g, b += f.block_bytes()) {
        uint16_t h;
        std::memcpy(&h, b, 2);
        if ((h & 0x7c00u) == 0x7c00u) return g * f.group;
    }
    return -1;
}

} // namespace strata::group_int
