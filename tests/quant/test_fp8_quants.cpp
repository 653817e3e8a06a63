// The FP8 formats (plugins/quant/fp8, the repacked compressed-tensors / fp8 weights): e4m3 as the OCP spec defines
// it (every one of the 256 bytes), rounding to nearest even with saturation, the block layout plugin_abi.h states,
// the scalar and AVX2 dots against a float64 sum over the dequantized row, and the damage check.
#include "fp8_formats.hpp"

#include <strata/cpu_features.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace {

using namespace strata::fp8;

std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (float &x : v) x = d(rng);
    return v;
}

// IEEE half bits to float, written from the definition (for checking e4m3_as_half_over_256).
double half_value(uint16_t h) {
    const int exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
    const double v = exponent == 0 ? std::ldexp(mantissa, -24) : std::ldexp(1024 + mantissa, exponent - 25);
    return (h & 0x8000) ? -v : v;
}

TEST(Fp8Quants, E4m3ValuesAreTheOcpOnes) {
    EXPECT_EQ(e4m3_to_float(0x00), 0.0f);
    EXPECT_EQ(e4m3_to_float(0x01), 0x1p-9f); // smallest subnormal
    EXPECT_EQ(e4m3_to_float(0x07), 7 * 0x1p-9f);
    EXPECT_EQ(e4m3_to_float(0x08), 0x1p-6f); // smallest normal
    EXPECT_EQ(e4m3_to_float(0x38), 1.0f);
    EXPECT_EQ(e4m3_to_float(0x3c), 1.5f);
    EXPECT_EQ(e4m3_to_float(0x40), 2.0f);
    EXPECT_EQ(e4m3_to_float(0x7e), 448.0f); // largest finite: no infinities
    EXPECT_EQ(e4m3_to_float(0xfe), -448.0f);
    EXPECT_EQ(e4m3_to_float(0xb8), -1.0f);
    EXPECT_TRUE(std::isnan(e4m3_to_float(0x7f)));
    EXPECT_TRUE(std::isnan(e4m3_to_float(0xff)));
    EXPECT_TRUE(std::signbit(e4m3_to_float(0x80)));
    // The positive codes are strictly increasing, and the negative ones mirror them.
    for (int q = 1; q < 0x7f; ++q) {
        ASSERT_LT(e4m3_to_float(static_cast<uint8_t>(q - 1)), e4m3_to_float(static_cast<uint8_t>(q))) << q;
        ASSERT_EQ(e4m3_to_float(static_cast<uint8_t>(q | 0x80)), -e4m3_to_float(static_cast<uint8_t>(q))) << q;
    }
}

TEST(Fp8Quants, RoundingIsToNearestEvenAndSaturates) {
    for (int q = 0; q < 256; ++q) {
        if ((q & 0x7f) == 0x7f) continue;
        ASSERT_EQ(float_to_e4m3(e4m3_to_float(static_cast<uint8_t>(q))), q) << "code " << q << " round-trips";
    }
    // Midway between two neighbours goes to the even mantissa; a hair past it goes up.
    for (int q = 0; q < 0x7e; ++q) {
        const float lo = e4m3_to_float(static_cast<uint8_t>(q)), hi = e4m3_to_float(static_cast<uint8_t>(q + 1));
        const float mid = (lo + hi) / 2; // exact in float
        ASSERT_EQ(float_to_e4m3(mid), (q % 2 == 0) ? q : q + 1) << "midpoint after code " << q;
        ASSERT_EQ(float_to_e4m3(std::nextafter(mid, hi)), q + 1) << q;
        ASSERT_EQ(float_to_e4m3(std::nextafter(mid, lo)), q) << q;
    }
    EXPECT_EQ(float_to_e4m3(460.0f), 0x7e);
    EXPECT_EQ(float_to_e4m3(1e9f), 0x7e);
    EXPECT_EQ(float_to_e4m3(-INFINITY), 0xfe);
    EXPECT_EQ(float_to_e4m3(NAN), 0x7f);
    EXPECT_EQ(float_to_e4m3(0x1p-11f), 0x00); // a quarter of the smallest subnormal
}

TEST(Fp8Quants, TheHalfBitsTheAvx2KernelWidensAreTheValueOver256) {
    for (int q = 0; q < 256; ++q) {
        if ((q & 0x7f) == 0x7f) continue;
        ASSERT_EQ(half_value(e4m3_as_half_over_256(static_cast<uint8_t>(q))) * 256.0,
                  static_cast<double>(e4m3_to_float(static_cast<uint8_t>(q))))
            << q;
    }
}

TEST(Fp8Quants, BlockLayoutIsTheOneTheAbiStates) {
    const format &f = *find_format(STRATA_TYPE_F8_E4M3_B32);
    ASSERT_EQ(f.block_bytes(), 36u);
    ASSERT_EQ(find_format(STRATA_TYPE_F8_E4M3_B128)->block_bytes(), 132u);
    std::vector<uint8_t> block(f.block_bytes(), 0);
    const float scale = 0.25f;
    std::memcpy(block.data(), &scale, 4);
    block[4 + 0] = 0x38;  // 1.0
    block[4 + 31] = 0xc4; // -3.0
    std::vector<float> w(32);
    dequantize_row(f, block.data(), w.data(), 32);
    EXPECT_EQ(w[0], 0.25f);
    EXPECT_EQ(w[31], -0.75f);
    EXPECT_EQ(w[1], 0.0f);
}

TEST(Fp8Quants, DotsEqualTheSumOverTheDequantizedRow) {
    for (const format &f : formats) {
        const int64_t n = 512;
        std::vector<float> src = random_floats(n, 3 + f.type, -2.0f, 3.0f);
        src[5] = 0.0f;
        src[7] = 1e-6f; // a subnormal e4m3 in its block
        std::vector<uint8_t> row(static_cast<size_t>(n / f.block * f.block_bytes()));
        quantize_row(f, src.data(), row.data(), n);
        std::vector<float> w(n);
        dequantize_row(f, row.data(), w.data(), n);
        // Round-to-nearest: each element within half an e4m3 step (2^-4 relative, 2^-10 of the scale below normals).
        for (int64_t g = 0; g < n / f.block; ++g) {
            const float s = block_scale(row.data() + g * f.block_bytes());
            for (int i = 0; i < f.block; ++i) {
                const float x = src[g * f.block + i];
                ASSERT_LE(std::fabs(w[g * f.block + i] - x), std::fabs(x) * 0x1p-4f + s * 0x1p-10f) << f.type << " " << i;
            }
        }
        const std::vector<float> x = random_floats(n, 7);
        double want = 0, mag = 0;
        for (int64_t i = 0; i < n; ++i) {
            want += static_cast<double>(w[i]) * x[i];
            mag += std::fabs(static_cast<double>(w[i]) * x[i]);
        }
        EXPECT_NEAR(dot_scalar_for(f.type)(row.data(), x.data(), n), want, 1e-5 * mag) << f.type;
        if (strata::plugin::cpu_has_avx2_fma_f16c()) {
            EXPECT_NEAR(dot_avx2_for(f.type)(row.data(), x.data(), n), want, 1e-5 * mag) << f.type;
        }
    }
}

TEST(Fp8Quants, ANonFiniteScaleOrANanByteIsFoundAtItsBlock) {
    const format &f = *find_format(STRATA_TYPE_F8_E4M3_B32);
    const std::vector<float> src = random_floats(256, 1);
    std::vector<uint8_t> row(8 * f.block_bytes());
    quantize_row(f, src.data(), row.data(), 256);
    EXPECT_EQ(find_nonfinite(f, row.data(), 256), -1);
    row[5 * f.block_bytes() + 4 + 17] = 0xff; // NaN
    EXPECT_EQ(find_nonfinite(f, row.data(), 256), 160);
    const float inf = INFINITY;
    std::memcpy(row.data() + 2 * f.block_bytes(), &inf, 4);
    EXPECT_EQ(find_nonfinite(f, row.data(), 256), 64);
}

TEST(Fp8Quants, TheDescriptorsCarryTheFormats) {
    const strata_quant_desc *d = descriptors();
    for (int i = 0; i < format_count; ++i) {
        EXPECT_EQ(d[i].ggml_type, formats[i].type);
        EXPECT_EQ(d[i].block_elems, static_cast<uint32_t>(formats[i].block));
        EXPECT_EQ(d[i].block_bytes, formats[i].block_bytes());
        EXPECT_NE(d[i].dot_f32, nullptr);
        EXPECT_EQ(d[i].act_block_bytes, 0u); // no integer path: the activations stay f32
    }
}

} // namespace
