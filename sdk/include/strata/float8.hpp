// Exact scalar conversions between float32 and the two 8-bit float formats of the OCP FP8 spec that FP8 checkpoints
// and the FP8 KV caches store (header-only, for the host, plugins and CUDA device code alike):
//   e4m3 ("e4m3fn"): sign, 4 exponent bits biased by 7, 3 mantissa bits; no infinities, S.1111.111 is NaN; the
//                    largest finite value is 448, the smallest subnormal 2^-9.
//   e5m2:            sign, 5 exponent bits biased by 15, 2 mantissa bits (IEEE-like: the top byte of a binary16);
//                    infinities and NaNs; the largest finite value is 57344, the smallest subnormal 2^-16.
// Float to FP8 rounds to nearest even and saturates to the largest finite value (infinities included), NaN becomes 0x7f:
// what CUDA's __nv_cvt_float_to_fp8(x, __NV_SATFINITE, ...) does, which vLLM's FP8 KV cache and FP8 quantizers use.
// Pure integer bit manipulation, so results do not depend on the rounding mode or on hardware FP8 support.
#pragma once

#include <strata/float16.hpp>

#include <cstdint>

namespace strata::float8 {

// The decoding of every finite and non-finite code, exact.
STRATA_FLOAT16_FN float e4m3_to_fp32(uint8_t q) {
    const uint32_t sign = static_cast<uint32_t>(q & 0x80u) << 24;
    const uint32_t exponent = (q >> 3) & 0xfu, mantissa = q & 7u;
    if (exponent == 0xfu && mantissa == 7u) return float16::bits_to_float(sign | 0x7fc00000u); // NaN
    if (exponent != 0) return float16::bits_to_float(sign | ((exponent + (127 - 7)) << 23) | (mantissa << 20));
    // Subnormal: mantissa * 2^-9, exact in float32.
    const float magnitude = static_cast<float>(mantissa) * 0.001953125f;
    return sign != 0 ? -magnitude : magnitude;
}

// e5m2 is binary16 with its low 8 mantissa bits dropped.
STRATA_FLOAT16_FN float e5m2_to_fp32(uint8_t q) { return float16::fp16_to_fp32(static_cast<uint16_t>(q << 8)); }

namespace detail {

// |f| (as float32 bits, finite, below the saturation bound) rounded to nearest even on an FP8 grid with MAN mantissa
// bits, exponent bias BIAS: the code's exponent and mantissa bits.
template <int MAN, int BIAS> STRATA_FLOAT16_FN uint32_t round_magnitude(uint32_t magnitude) {
    constexpr uint32_t min_normal = static_cast<uint32_t>(127 - BIAS + 1) << 23; // 2^(1 - BIAS)
    if (magnitude >= min_normal) {
        // Normal: drop 23 - MAN mantissa bits; a carry out of the mantissa moves the exponent up, as it should.
        constexpr int drop = 23 - MAN;
        const uint32_t code = (magnitude - (static_cast<uint32_t>(127 - BIAS) << 23)) >> drop;
        const uint32_t rest = magnitude & ((1u << drop) - 1u), half = 1u << (drop - 1);
        return code + (rest > half || (rest == half && (code & 1u)) ? 1u : 0u);
    }
    // Subnormal: the value in units of the smallest subnormal 2^(1 - BIAS - MAN) is the 24-bit significand shifted
    // right by `shift`; a code of 1 << MAN that rounding reaches is the smallest normal, correctly encoded.
    const uint32_t exponent = magnitude >> 23;
    if (exponent == 0) return 0; // float32 subnormals are far below half the smallest FP8 subnormal
    const uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;
    const uint32_t shift = static_cast<uint32_t>(150 - (BIAS + MAN - 1)) - exponent;
    if (shift > 25) return 0; // below half the smallest subnormal
    const uint32_t code = significand >> shift;
    const uint32_t rest = significand & ((1u << shift) - 1u), half = 1u << (shift - 1);
    return code + (rest > half || (rest == half && (code & 1u)) ? 1u : 0u);
}

// f with saturation at the largest finite value: max_finite_bits is that value as float32 bits, max_code its code.
template <int MAN, int BIAS, uint32_t max_finite_bits, uint32_t max_code> STRATA_FLOAT16_FN uint8_t encode(float f) {
    const uint32_t x = float16::float_bits(f);
    const uint32_t sign = (x >> 24) & 0x80u, magnitude = x & 0x7fffffffu;
    if (magnitude > 0x7f800000u) return 0x7fu; // NaN, whatever its sign (as CUDA's)
    if (magnitude >= max_finite_bits) return static_cast<uint8_t>(sign | max_code); // and inf: saturate
    return static_cast<uint8_t>(sign | round_magnitude<MAN, BIAS>(magnitude));
}

} // namespace detail

// 448 = 0x43e00000 is e4m3's largest finite value (code 0x7e).
STRATA_FLOAT16_FN uint8_t fp32_to_e4m3(float f) { return detail::encode<3, 7, 0x43e00000u, 0x7eu>(f); }

// 57344 = 0x47600000 is e5m2's largest finite value (code 0x7b).
STRATA_FLOAT16_FN uint8_t fp32_to_e5m2(float f) { return detail::encode<2, 15, 0x47600000u, 0x7bu>(f); }

} // namespace strata::float8
