// IEEE half (F16) and bfloat16 (BF16) to float, exactly, for loaders and tools (kernels have their own SIMD forms).
#pragma once

#include <cstdint>
#include <cstring>

namespace strata {

inline float bf16_to_f32(uint16_t h) {
    const uint32_t bits = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

inline float f16_to_f32(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0 && man == 0) {
        bits = sign;
    } else if (exp == 0) { // subnormal: normalize
        int shift = 0;
        uint32_t m = man;
        while ((m & 0x400u) == 0) {
            m <<= 1;
            ++shift;
        }
        bits = sign | static_cast<uint32_t>(113 - shift) << 23 | (m & 0x3ffu) << 13;
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | man << 13;
    } else {
        bits = sign | (exp + 112) << 23 | man << 13;
    }
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

// float to IEEE half, rounding to nearest even (F16C's vcvtps2ph); past 65504 infinity, NaN stays NaN.
inline uint16_t f32_to_f16(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    const uint32_t sign = (x >> 16) & 0x8000u, abs = x & 0x7fffffffu;
    if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);
    if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u); // rounds past 65504 (or is infinite)
    if (abs < 0x38800000u) { // a half subnormal (or zero): units of 2^-24, rounded to nearest even
        const uint32_t m = (abs & 0x7fffffu) | 0x800000u;
        const int shift = 126 - static_cast<int>(abs >> 23); // 14 + (113 - exponent)
        if (shift > 24) return static_cast<uint16_t>(sign);
        const uint32_t q = m >> shift, rest = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        return static_cast<uint16_t>(sign | (q + (rest > half || (rest == half && (q & 1u)) ? 1u : 0u)));
    }
    uint32_t h = ((abs >> 23) - 112u) << 10 | ((abs & 0x7fffffu) >> 13);
    const uint32_t rest = abs & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
}

// float to bfloat16, rounding to nearest even as PyTorch does (NaN stays NaN).
inline uint16_t f32_to_bf16(float f) {
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
    bits += 0x7fffu + ((bits >> 16) & 1);
    return static_cast<uint16_t>(bits >> 16);
}

} // namespace strata
