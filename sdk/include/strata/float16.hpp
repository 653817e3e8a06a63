// Exact scalar conversions between float32 and the two 16-bit float formats (IEEE binary16, bfloat16) that GGUF
// weights and the 16-bit KV caches store (header-only, for the host and plugins alike). Pure integer bit
// manipulation, so results do not depend on compiler support for _Float16 or on F16C being present; they match
// F16C's vcvtps2ph/vcvtph2ps (round-to-nearest-even) and ggml's GGML_FP32_TO_BF16 bit for bit.
#pragma once

#include <cstdint>
#include <cstring>

// Callable from CUDA device code too (the CUDA device's 16-bit KV cache rounds with these).
#if defined(__CUDACC__)
#define STRATA_FLOAT16_FN __host__ __device__ inline
#else
#define STRATA_FLOAT16_FN inline
#endif

namespace strata::float16 {

STRATA_FLOAT16_FN uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
    return __float_as_uint(f);
#else
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
#endif
}

STRATA_FLOAT16_FN float bits_to_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
#endif
}

// binary16 -> float32 is exact for every input (subnormals included); NaN payloads are kept.
STRATA_FLOAT16_FN float fp16_to_fp32(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exponent = (h >> 10) & 0x1fu;
    const uint32_t mantissa = h & 0x3ffu;
    if (exponent == 0x1fu) return bits_to_float(sign | 0x7f800000u | (mantissa << 13)); // inf / NaN
    if (exponent != 0) return bits_to_float(sign | ((exponent + (127 - 15)) << 23) | (mantissa << 13));
    if (mantissa == 0) return bits_to_float(sign); // +-0
    // Subnormal half: mantissa * 2^-24, exact in float32 (the product is a normal float).
    const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
    return sign != 0 ? -magnitude : magnitude;
}

// float32 -> binary16 with IEEE round-to-nearest-even; overflow goes to +-inf, NaN stays a (quiet) NaN with the top
// payload bits kept, like vcvtps2ph.
STRATA_FLOAT16_FN uint16_t fp32_to_fp16(float f) {
    const uint32_t x = float_bits(f);
    const uint32_t sign = (x >> 16) & 0x8000u;
    const uint32_t magnitude = x & 0x7fffffffu;
    if (magnitude > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));
    if (magnitude >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u); // >= 65520 rounds to inf
    if (magnitude < 0x38800000u) {
        // Result is a half subnormal (or zero): round magnitude / 2^-24 to an integer, ties to even.
        if (magnitude <= 0x33000000u) return static_cast<uint16_t>(sign); // <= 2^-25 rounds to zero
        const uint32_t exponent = magnitude >> 23;                        // 102..112
        const uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;
        const uint32_t shift = 126u - exponent; // value / 2^-24 = mantissa * 2^(exponent - 126)
        uint32_t half = mantissa >> shift;
        const uint32_t remainder = mantissa & ((1u << shift) - 1u);
        const uint32_t halfway = 1u << (shift - 1u);
        if (remainder > halfway || (remainder == halfway && (half & 1u) != 0)) ++half;
        return static_cast<uint16_t>(sign | half);
    }
    // Normal: rebias the exponent, round the 13 dropped bits; a carry into the exponent is the correct result
    // (including the step up to inf, already handled above).
    uint32_t half = (magnitude - ((127u - 15u) << 23)) >> 13;
    const uint32_t remainder = magnitude & 0x1fffu;
    if (remainder > 0x1000u || (remainder == 0x1000u && (half & 1u) != 0)) ++half;
    return static_cast<uint16_t>(sign | half);
}

STRATA_FLOAT16_FN float bf16_to_fp32(uint16_t h) { return bits_to_float(static_cast<uint32_t>(h) << 16); }

// Same as ggml's ggml_compute_fp32_to_bf16: round-to-nearest-even, NaN forced quiet, subnormals kept.
STRATA_FLOAT16_FN uint16_t fp32_to_bf16(float f) {
    const uint32_t x = float_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 64u);
    return static_cast<uint16_t>((x + (0x7fffu + ((x >> 16) & 1u))) >> 16);
}

} // namespace strata::float16
