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

// float to bfloat16, rounding to nearest even as PyTorch does (NaN stays NaN).
inline uint16_t f32_to_bf16(float f) {
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
    bits += 0x7fffu + ((bits >> 16) & 1);
    return static_cast<uint16_t>(bits >> 16);
}

} // namespace strata
