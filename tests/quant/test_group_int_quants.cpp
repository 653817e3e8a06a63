// The group-integer formats (plugins/quant/group_int, the repacked GPTQ / AWQ weights): block layout as
// plugin_abi.h states it, the scalar and AVX2 dots against a float64 sum over the dequantized row, and the checks.
#include "group_int_formats.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace {

using namespace strata::group_int;

std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (float &x : v) x = d(rng);
    return v;
}

TEST(GroupIntQuants, BlockLayoutIsTheOneTheAbiStates) {
    // 4 bits, G = 32: element j in byte 4 + j's low nibble, element j + 16 in its high nibble.
    const format &f = *find_format(STRATA_TYPE_Q4_G32);
    std::vector<uint8_t> block(f.block_bytes(), 0);
    const uint16_t two = 0x4000; // f16 2.0
    std::memcpy(block.data(), &two, 2);
    block[2] = 8;
    block[4 + 3] = 0xa5; // element 3 = 5, element 19 = 10
    std::vector<float> w(32);
    dequantize_row(f, block.data(), w.data(), 32);
    EXPECT_EQ(w[3], 2.0f * (5 - 8));
    EXPECT_EQ(w[19], 2.0f * (10 - 8));
    EXPECT_EQ(w[0], 2.0f * (0 - 8));
    // 8 bits: element i in byte 4 + i.
    const format &g = *find_format(STRATA_TYPE_Q8_G64);
    std::vector<uint8_t> b8(g.block_bytes(), 128);
    std::memcpy(b8.data(), &two, 2);
    b8[2] = 100;
    b8[4 + 63] = 255;
    std::vector<float> w8(64);
    dequantize_row(g, b8.data(), w8.data(), 64);
    EXPECT_EQ(w8[63], 2.0f * (255 - 100));
    EXPECT_EQ(w8[0], 2.0f * (128 - 100));
}

TEST(GroupIntQuants, DotsEqualTheSumOverTheDequantizedRow) {
    for (const format &f : formats) {
        const int64_t n = 512;
        const std::vector<float> src = random_floats(n, 3 + f.type, -2.0f, 3.0f);
        std::vector<uint8_t> row(static_cast<size_t>(n / f.group * f.block_bytes()));
        quantize_row(f, src.data(), row.data(), n);
        std::vector<float> w(n);
        dequantize_row(f, row.data(), w.data(), n);
        // Round-to-nearest: every element within half a step of its source.
        for (int64_t g = 0; g < n / f.group; ++g) {
            const float s = block_scale(row.data() + g * f.block_bytes());
            for (int i = 0; i < f.group; ++i)
                ASSERT_LE(std::fabs(w[g * f.group + i] - src[g * f.group + i]), 0.5f * s * 1.001f) << f.type;
        }
        const std::vector<float> x = random_floats(n, 7);
        double want = 0, mag = 0;
        for (int64_t i = 0; i < n; ++i) {
            want += static_cast<double>(w[i]) * x[i];
            mag += std::fabs(static_cast<double>(w[i]) * x[i]);
        }
        EXPECT_NEAR(dot_scalar_for(f.type)(row.data(), x.data(), n), want, 1e-5 * mag) << f.type;
        if (cpu_has_avx2_fma_f16c()) {
            EXPECT_NEAR(dot_avx2_for(f.type)(row.data(), x.data(), n), want, 1e-5 * mag) << f.type;
        }
    }
}

TEST(GroupIntQuants, ANonFiniteScaleIsFoundAtItsBlock) {
    const format &f = *find_format(STRATA_TYPE_Q4_G128);
    const std::vector<float> src = random_floats(512, 1);
    std::vector<uint8_t> row(4 * f.block_bytes());
    quantize_row(f, src.data(), row.data(), 512);
    EXPECT_EQ(find_nonfinite(f, row.data(), 512), -1);
    const uint16_t inf = 0x7c00;
    std::memcpy(row.data() + 2 * f.block_bytes(), &inf, 2);
    EXPECT_EQ(find_nonfinite(f, row.data(), 512), 256);
}

TEST(GroupIntQuants, TheDescriptorsCarryTheFormats) {
    const strata_quant_desc *d = descriptors();
    for (int i = 0; i < format_count; ++i) {
        EXPECT_EQ(d[i].ggml_type, formats[i].type);
        EXPECT_EQ(d[i].block_elems, static_cast<uint32_t>(formats[i].group));
        EXPECT_EQ(d[i].block_bytes, formats[i].block_bytes());
        EXPECT_NE(d[i].dot_f32, nullptr);
    }
}

} // namespace
