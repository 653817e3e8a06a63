// strata/float8.hpp (the FP8 KV caches' and FP8 weights' conversions) against NVIDIA's own: the host versions of
// __nv_cvt_float_to_fp8 (__NV_SATFINITE, what vLLM's FP8 KV cache stores with) and __nv_cvt_fp8_to_halfraw from
// the CUDA toolkit's cuda_fp8.h, compiled here as plain C++ (no GPU, no CUDA runtime).
#include <cuda_fp8.h>

#include <strata/float16.hpp>
#include <strata/float8.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>

namespace {

float float_of(uint32_t bits) {
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}

uint8_t nvidia_encode(float f, __nv_fp8_interpretation_t format) {
    return static_cast<uint8_t>(__nv_cvt_float_to_fp8(f, __NV_SATFINITE, format));
}

float nvidia_decode(uint8_t q, __nv_fp8_interpretation_t format) {
    const __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(q), format);
    return strata::float16::fp16_to_fp32(h.x); // exact: every FP8 value is a half
}

void expect_same_value(float ours, float theirs, int code, const char *format) {
    if (std::isnan(theirs)) EXPECT_TRUE(std::isnan(ours)) << format << " code " << code;
    else EXPECT_EQ(std::memcmp(&ours, &theirs, sizeof ours), 0) << format << " code " << code << ": " << ours << " vs " << theirs;
}

TEST(Float8VsCuda, EveryCodeDecodesToNvidiasValue) {
    for (int q = 0; q < 256; ++q) {
        expect_same_value(strata::float8::e4m3_to_fp32(static_cast<uint8_t>(q)), nvidia_decode(static_cast<uint8_t>(q), __NV_E4M3), q, "e4m3");
        expect_same_value(strata::float8::e5m2_to_fp32(static_cast<uint8_t>(q)), nvidia_decode(static_cast<uint8_t>(q), __NV_E5M2), q, "e5m2");
    }
}

// Every 61st float32 bit pattern (70 million: all exponents, signs, NaNs, infinities, subnormals, and mantissas
// that hit ties), then every float near each FP8 value and midpoint.
TEST(Float8VsCuda, EncodingEqualsNvidiasSaturatingRoundToNearestEven) {
    int64_t mismatches = 0;
    auto check = [&](uint32_t bits) {
        const float f = float_of(bits);
        const uint8_t e4 = strata::float8::fp32_to_e4m3(f), n4 = nvidia_encode(f, __NV_E4M3);
        const uint8_t e5 = strata::float8::fp32_to_e5m2(f), n5 = nvidia_encode(f, __NV_E5M2);
        if ((e4 != n4 || e5 != n5) && mismatches++ < 10)
            ADD_FAILURE() << std::hex << "float bits 0x" << bits << ": e4m3 0x" << int(e4) << " vs 0x" << int(n4)
                          << ", e5m2 0x" << int(e5) << " vs 0x" << int(n5);
    };
    for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 61) check(static_cast<uint32_t>(u));
    for (int q = 0; q < 128; ++q) {
        for (const float v : {strata::float8::e4m3_to_fp32(static_cast<uint8_t>(q)), strata::float8::e5m2_to_fp32(static_cast<uint8_t>(q))}) {
            if (!std::isfinite(v)) continue;
            uint32_t bits;
            std::memcpy(&bits, &v, sizeof bits);
            for (int64_t d = -4096; d <= 4096; ++d) {
                const int64_t b = int64_t{bits} + d * 64; // spans the neighbouring midpoints of both formats
                if (b >= 0 && b < 0x7f800000) {
                    check(static_cast<uint32_t>(b));
                    check(static_cast<uint32_t>(b) | 0x80000000u);
                }
            }
            // The exact midpoints to the next code up, and a hair either side.
            const float next = q + 1 < 128 ? strata::float8::e4m3_to_fp32(static_cast<uint8_t>(q + 1)) : v;
            if (std::isfinite(next) && next > v) {
                const float mid = v + (next - v) / 2;
                check(strata::float16::float_bits(mid));
                check(strata::float16::float_bits(std::nextafter(mid, 0.0f)));
                check(strata::float16::float_bits(std::nextafter(mid, 1e30f)));
            }
        }
    }
    EXPECT_EQ(mismatches, 0);
}

} // namespace
