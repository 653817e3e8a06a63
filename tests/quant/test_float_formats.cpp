// fp16 / bf16 conversion helpers: exhaustive round trips, rounding ties, specials, and agreement with F16C.
#include "f16c_reference.hpp"
#include "ggml_quants.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

namespace q = strata::quants;

namespace {

bool is_fp16_nan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }

TEST(Fp16Conversion, EveryHalfRoundTripsExactly) {
    for (uint32_t h = 0; h <= 0xffffu; ++h) {
        const auto half = static_cast<uint16_t>(h);
        const float f = q::fp16_to_fp32(half);
        if (is_fp16_nan(half)) {
            ASSERT_TRUE(std::isnan(f)) << std::hex << h;
            ASSERT_TRUE(is_fp16_nan(q::fp32_to_fp16(f))) << std::hex << h;
            continue;
        }
        ASSERT_EQ(q::fp32_to_fp16(f), half) << "half 0x" << std::hex << h << " -> " << f;
    }
}

TEST(Fp16Conversion, KnownValues) {
    EXPECT_EQ(q::fp32_to_fp16(1.0f), 0x3c00u);
    EXPECT_EQ(q::fp32_to_fp16(-2.0f), 0xc000u);
    EXPECT_EQ(q::fp32_to_fp16(65504.0f), 0x7bffu);
    EXPECT_EQ(q::fp32_to_fp16(65519.99f), 0x7bffu); // below the rounding midpoint to inf
    EXPECT_EQ(q::fp32_to_fp16(65520.0f), 0x7c00u);  // midpoint ties to even = inf
    EXPECT_EQ(q::fp32_to_fp16(1e10f), 0x7c00u);
    EXPECT_EQ(q::fp32_to_fp16(-std::numeric_limits<float>::infinity()), 0xfc00u);
    EXPECT_EQ(q::fp32_to_fp16(5.9604644775390625e-8f), 0x0001u); // smallest subnormal
    EXPECT_EQ(q::fp32_to_fp16(2.98023223876953125e-8f), 0x0000u); // half of it ties to even (zero)
    EXPECT_EQ(q::fp32_to_fp16(2.9802326e-8f), 0x0001u);           // just above the tie
    EXPECT_EQ(q::fp32_to_fp16(-0.0f), 0x8000u);
    EXPECT_EQ(q::fp32_to_fp16(6.103515625e-05f), 0x0400u); // smallest normal
    // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even (1). 1 + 3*2^-11 ties up to 1 + 2*2^-10.
    EXPECT_EQ(q::fp32_to_fp16(1.0f + 0x1p-11f), 0x3c00u);
    EXPECT_EQ(q::fp32_to_fp16(1.0f + 3 * 0x1p-11f), 0x3c02u);
    EXPECT_TRUE(is_fp16_nan(q::fp32_to_fp16(std::numeric_limits<float>::quiet_NaN())));
    EXPECT_FLOAT_EQ(q::fp16_to_fp32(0x3555u), 0.333251953125f);
    EXPECT_EQ(q::fp16_to_fp32(0x0001u), 5.9604644775390625e-8f);
}

TEST(Fp16Conversion, MatchesF16cOnSampledFloats) {
    if (!strata_test_cpu_has_f16c()) GTEST_SKIP() << "CPU lacks F16C; exhaustive half round trip still ran";
    // Every 997th float bit pattern, both signs, all exponents: about 4.3 million conversions.
    for (uint64_t bits = 0; bits <= 0xffffffffull; bits += 997) {
        const float f = q::bits_to_float(static_cast<uint32_t>(bits));
        const uint16_t expected = strata_test_f16c_fp32_to_fp16(f);
        const uint16_t got = q::fp32_to_fp16(f);
        ASSERT_EQ(got, expected) << "float bits 0x" << std::hex << bits;
    }
}

TEST(Bf16Conversion, EveryNonNanBf16RoundTripsExactly) {
    for (uint32_t h = 0; h <= 0xffffu; ++h) {
        const auto b = static_cast<uint16_t>(h);
        const float f = q::bf16_to_fp32(b);
        if (std::isnan(f)) {
            ASSERT_TRUE(std::isnan(q::bf16_to_fp32(q::fp32_to_bf16(f))));
            continue;
        }
        ASSERT_EQ(q::fp32_to_bf16(f), b) << std::hex << h;
    }
}

TEST(Bf16Conversion, RoundsToNearestEvenLikeGgml) {
    EXPECT_EQ(q::fp32_to_bf16(q::bits_to_float(0x3f808000u)), 0x3f80u); // tie, even stays
    EXPECT_EQ(q::fp32_to_bf16(q::bits_to_float(0x3f818000u)), 0x3f82u); // tie, odd rounds up
    EXPECT_EQ(q::fp32_to_bf16(q::bits_to_float(0x3f808001u)), 0x3f81u); // above the tie
    EXPECT_EQ(q::fp32_to_bf16(q::bits_to_float(0x3f807fffu)), 0x3f80u); // below the tie
    EXPECT_EQ(q::fp32_to_bf16(std::numeric_limits<float>::max()), 0x7f80u); // rounds up to inf, as ggml does
    EXPECT_EQ(q::fp32_to_bf16(q::bits_to_float(0x00012345u)), 0x0001u);   // subnormals are kept, not flushed
    // NaN stays NaN and is made quiet (bit 6 of the bf16), even for a signalling NaN whose payload would vanish.
    const uint16_t nan = q::fp32_to_bf16(q::bits_to_float(0x7f800001u));
    EXPECT_EQ(nan, 0x7fc0u);
    EXPECT_TRUE(std::isnan(q::bf16_to_fp32(nan)));
    EXPECT_EQ(q::bf16_to_fp32(0xc040u), -3.0f);
}

} // namespace
