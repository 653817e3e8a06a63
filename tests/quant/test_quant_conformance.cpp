// quantize -> dequantize round trips stay within each format's error bound, and the block layouts match ggml's
// on hand-checked blocks (rounding mode, nibble packing, the Q4_0 clamp at 15).
#include "ggml_quants.hpp"
#include "quant_test_data.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace q = strata::quants;
using strata::quants::testing::normal_values;
using strata::quants::testing::uniform_values;

namespace {

// Named inputs for the round-trip checks. Sizes are multiples of 32 so every format accepts them.
struct named_input {
    std::string name;
    std::vector<float> values;
};

std::vector<named_input> block_test_inputs() {
    std::vector<named_input> inputs;
    inputs.push_back({"normal", normal_values(4096, 1)});
    inputs.push_back({"uniform_wide", uniform_values(4096, 2, -300.0f, 300.0f)});
    inputs.push_back({"zeros", std::vector<float>(256, 0.0f)});
    std::vector<float> constant;
    for (float c : {1.0f, -1.0f, 0.1f, -7.25f, 1000.0f, 3e-3f}) constant.insert(constant.end(), 32, c);
    inputs.push_back({"constant_blocks", constant});
    inputs.push_back({"huge", normal_values(1024, 3, 5e4f)}); // scales (amax/127, max/8) stay below fp16 max 65504
    inputs.push_back({"tiny", normal_values(1024, 4, 1e-6f)}); // scales become fp16 subnormals
    inputs.push_back({"vanishing", normal_values(256, 5, 1e-12f)}); // scales round to zero in fp16
    // One outlier per block (the Q4_0 sign/clamp case) and mixed magnitudes.
    std::vector<float> outliers = normal_values(1024, 6);
    for (size_t i = 0; i < outliers.size(); i += 32) {
        outliers[i + (i / 32) % 32] *= ((i / 32) % 2 != 0 ? -50.0f : 50.0f);
    }
    inputs.push_back({"outliers", outliers});
    return inputs;
}

TEST(QuantF32, RoundTripIsExact) {
    const auto x = normal_values(1000, 7);
    std::vector<float> stored(x.size()), back(x.size());
    q::quantize_row_f32(x.data(), stored.data(), static_cast<int64_t>(x.size()));
    q::dequantize_row_f32(stored.data(), back.data(), static_cast<int64_t>(x.size()));
    EXPECT_EQ(0, std::memcmp(x.data(), back.data(), x.size() * sizeof(float)));
}

TEST(QuantF16, RoundTripWithinHalfUlp) {
    for (const auto &input : block_test_inputs()) {
        std::vector<float> x = input.values;
        for (auto &v : x) v = std::fmax(std::fmin(v, 65504.0f), -65504.0f); // stay inside fp16's range
        const auto n = static_cast<int64_t>(x.size());
        std::vector<uint16_t> stored(x.size());
        std::vector<float> back(x.size());
        q::quantize_row_f16(x.data(), stored.data(), n);
        q::dequantize_row_f16(stored.data(), back.data(), n);
        for (int64_t i = 0; i < n; ++i) {
            // Normal range: relative 2^-11; subnormal range: absolute half of the smallest step 2^-24.
            const double bound = std::fmax(std::fabs(x[i]) * 0x1p-11, 0x1p-25);
            ASSERT_LE(std::fabs(static_cast<double>(back[i]) - x[i]), bound) << input.name << " element " << i;
        }
    }
}

TEST(QuantF16, OutOfRangeBecomesInfinity) {
    const float x[2] = {1e5f, -7e4f};
    uint16_t stored[2];
    float back[2];
    q::quantize_row_f16(x, stored, 2);
    q::dequantize_row_f16(stored, back, 2);
    EXPECT_TRUE(std::isinf(back[0]) && back[0] > 0);
    EXPECT_TRUE(std::isinf(back[1]) && back[1] < 0);
}

TEST(QuantBf16, RoundTripWithinHalfUlp) {
    for (const auto &input : block_test_inputs()) {
        const auto &x = input.values;
        const auto n = static_cast<int64_t>(x.size());
        std::vector<uint16_t> stored(x.size());
        std::vector<float> back(x.size());
        q::quantize_row_bf16(x.data(), stored.data(), n);
        q::dequantize_row_bf16(stored.data(), back.data(), n);
        for (int64_t i = 0; i < n; ++i) {
            const double bound = std::fabs(x[i]) * 0x1p-8;
            ASSERT_LE(std::fabs(static_cast<double>(back[i]) - x[i]), bound) << input.name << " element " << i;
        }
    }
}

// Q8_0: x*id rounds to within 0.5 of q, so |x - q*d| <= d/2 with d = amax/127 as computed in float. The stored scale
// is d rounded to fp16, which moves q*d by at most |q| * |d - d16| <= 127 * |d - d16| (and to 0 when d16 underflows).
TEST(QuantQ8_0, RoundTripWithinHalfStep) {
    for (const auto &input : block_test_inputs()) {
        const auto &x = input.values;
        const auto n = static_cast<int64_t>(x.size());
        std::vector<q::block_q8_0> stored(x.size() / 32);
        std::vector<float> back(x.size());
        q::quantize_row_q8_0(x.data(), stored.data(), n);
        q::dequantize_row_q8_0(stored.data(), back.data(), n);
        for (int64_t b = 0; b < n / 32; ++b) {
            double amax = 0;
            for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[b * 32 + j]));
            const double d = static_cast<float>(amax) / 127.0f;
            const double d16 = q::fp16_to_fp32(stored[b].d);
            const double bound = d / 2 + 127 * std::fabs(d - d16) + 1e-6 * amax;
            for (int j = 0; j < 32; ++j) {
                const int64_t i = b * 32 + j;
                ASSERT_LE(std::fabs(static_cast<double>(back[i]) - x[i]), bound)
                    << input.name << " block " << b << " element " << j << " d " << d;
            }
        }
    }
}

// Q4_0: d = max/-8 keeps the sign of the largest-magnitude element, which maps exactly to nibble 0 (-8 d). Values
// of the opposite sign reach x*id = +8, and nibble 15 (7 d) is the largest there is: for those clamped elements the
// error grows to |d| (it is |d|/2 everywhere else). The fp16 scale adds at most 8 * |d - d16|.
TEST(QuantQ4_0, RoundTripWithinHalfStepExceptClamped) {
    for (const auto &input : block_test_inputs()) {
        const auto &x = input.values;
        const auto n = static_cast<int64_t>(x.size());
        std::vector<q::block_q4_0> stored(x.size() / 32);
        std::vector<float> back(x.size());
        q::quantize_row_q4_0(x.data(), stored.data(), n);
        q::dequantize_row_q4_0(stored.data(), back.data(), n);
        for (int64_t b = 0; b < n / 32; ++b) {
            double max = 0;
            for (int j = 0; j < 32; ++j) {
                if (std::fabs(max) < std::fabs(x[b * 32 + j])) max = x[b * 32 + j];
            }
            const double d = std::fabs(static_cast<float>(max) / -8.0f);
            const double d16 = std::fabs(q::fp16_to_fp32(stored[b].d));
            const double slack = 8 * std::fabs(d - d16) + 1e-6 * std::fabs(max);
            for (int j = 0; j < 32; ++j) {
                const int64_t i = b * 32 + j;
                const uint8_t byte = stored[b].qs[j % 16];
                const int nibble = j < 16 ? (byte & 0x0f) : (byte >> 4);
                const double bound = (nibble == 15 ? d : d / 2) + slack;
                ASSERT_LE(std::fabs(static_cast<double>(back[i]) - x[i]), bound)
                    << input.name << " block " << b << " element " << j << " nibble " << nibble;
            }
        }
    }
}

// Hand-checked Q8_0 block: amax 127 gives d = 1 (fp16 0x3c00) and id = 1, so q = roundf(x): halves round away from
// zero (2.5 -> 3, -2.5 -> -3, 0.5 -> 1), unlike round-to-even.
TEST(QuantQ8_0, HandCheckedBlock) {
    float x[32] = {};
    x[0] = 127.0f;
    x[1] = 2.5f;
    x[2] = -2.5f;
    x[3] = 0.5f;
    x[4] = -126.6f;
    x[31] = 0.49f;
    q::block_q8_0 block{};
    q::quantize_row_q8_0(x, &block, 32);
    EXPECT_EQ(block.d, 0x3c00u);
    EXPECT_EQ(block.qs[0], 127);
    EXPECT_EQ(block.qs[1], 3);
    EXPECT_EQ(block.qs[2], -3);
    EXPECT_EQ(block.qs[3], 1);
    EXPECT_EQ(block.qs[4], -127);
    EXPECT_EQ(block.qs[5], 0);
    EXPECT_EQ(block.qs[31], 0);
    unsigned char raw[34];
    std::memcpy(raw, &block, sizeof raw);
    EXPECT_EQ(raw[0], 0x00); // little-endian fp16 scale first, then the 32 quants
    EXPECT_EQ(raw[1], 0x3c);
    EXPECT_EQ(raw[2], 127);
}

TEST(QuantQ8_0, AllZeroBlockHasZeroScale) {
    const std::vector<float> x(64, 0.0f);
    q::block_q8_0 blocks[2];
    std::memset(blocks, 0xff, sizeof blocks);
    q::quantize_row_q8_0(x.data(), blocks, 64);
    for (const auto &b : blocks) {
        EXPECT_EQ(b.d, 0u);
        for (int8_t v : b.qs) EXPECT_EQ(v, 0);
    }
}

// Hand-checked Q4_0 block: the signed max -8 gives d = 1, id = 1, nibble = (int)(x + 8.5) clamped to 15. Element j
// goes to the low nibble of byte j, element j+16 to the high nibble.
TEST(QuantQ4_0, HandCheckedBlockAndNibbleOrder) {
    float x[32] = {};
    x[0] = -8.0f;  // -> 0
    x[1] = 7.0f;   // 15.5 -> 15
    x[2] = 0.5f;   // 9.0 -> 9
    x[3] = -0.5f;  // 8.0 -> 8
    x[4] = 2.4f;   // 10.9 -> 10
    x[16] = 7.6f;  // 16.1 -> 16, clamped to 15
    x[17] = -7.9f; // 0.6 -> 0
    x[18] = 3.0f;  // 11.5 -> 11
    q::block_q4_0 block{};
    q::quantize_row_q4_0(x, &block, 32);
    EXPECT_EQ(block.d, 0x3c00u);
    EXPECT_EQ(block.qs[0], 0x0 | (15 << 4));
    EXPECT_EQ(block.qs[1], 15 | (0 << 4));
    EXPECT_EQ(block.qs[2], 9 | (11 << 4));
    EXPECT_EQ(block.qs[3], 8 | (8 << 4));
    EXPECT_EQ(block.qs[4], 10 | (8 << 4));
    float back[32];
    q::dequantize_row_q4_0(&block, back, 32);
    EXPECT_EQ(back[0], -8.0f);
    EXPECT_EQ(back[16], 7.0f); // the clamped element: error 0.6, more than d/2
    EXPECT_EQ(back[18], 3.0f);
}

// A positive maximum gives a negative scale; the opposite extreme lands on the clamp with error exactly |d|.
TEST(QuantQ4_0, NegativeScaleAndClampAtOppositeExtreme) {
    float x[32] = {};
    x[0] = 16.0f;  // max: d = -2, maps to nibble 0 -> (0 - 8) * -2 = 16
    x[1] = -16.0f; // x*id = 8 -> 16.5 -> clamped 15 -> (15 - 8) * -2 = -14
    q::block_q4_0 block{};
    q::quantize_row_q4_0(x, &block, 32);
    EXPECT_EQ(q::fp16_to_fp32(block.d), -2.0f);
    float back[32];
    q::dequantize_row_q4_0(&block, back, 32);
    EXPECT_EQ(back[0], 16.0f);
    EXPECT_EQ(back[1], -14.0f);
    EXPECT_EQ(back[2], 0.0f);
}

TEST(QuantDescriptors, TableDescribesEveryFormat) {
    ASSERT_EQ(q::n_descriptors(), 15);
    struct expected {
        const char *name;
        uint32_t type, block_elems, block_bytes;
    };
    // GGUF type ids and block sizes as ggml's type traits give them.
    const expected want[15] = {{"f32", 0, 1, 4},        {"f16", 1, 1, 2},       {"bf16", 30, 1, 2},
                               {"q8_0", 8, 32, 34},     {"q4_0", 2, 32, 18},    {"q4_1", 3, 32, 20},
                               {"q5_0", 6, 32, 22},     {"q5_1", 7, 32, 24},    {"iq4_nl", 20, 32, 18},
                               {"q2_k", 10, 256, 84},   {"q3_k", 11, 256, 110}, {"q4_k", 12, 256, 144},
                               {"q5_k", 13, 256, 176},  {"q6_k", 14, 256, 210}, {"iq4_xs", 23, 256, 136}};
    for (auto set : {q::kernel_set::scalar, q::kernel_set::avx2_fma}) {
        const strata_quant_desc *table = q::descriptors(set);
        for (int i = 0; i < 15; ++i) {
            EXPECT_STREQ(table[i].header.name, want[i].name);
            EXPECT_EQ(table[i].header.kind, static_cast<uint32_t>(STRATA_KIND_QUANT));
            EXPECT_EQ(table[i].header.struct_size, sizeof(strata_quant_desc));
            EXPECT_EQ(table[i].header.required_size, offsetof(strata_quant_desc, kernel_name));
            EXPECT_EQ(table[i].ggml_type, want[i].type);
            EXPECT_EQ(table[i].block_elems, want[i].block_elems);
            EXPECT_EQ(table[i].block_bytes, want[i].block_bytes);
            ASSERT_TRUE(STRATA_HAS_SLOT(&table[i], kernel_name));
            EXPECT_STREQ(table[i].kernel_name(), q::kernel_set_name(set));
        }
    }
    EXPECT_EQ(q::descriptors(q::kernel_set::scalar)[3].dot_f32, &q::dot_q8_0_scalar);
    EXPECT_EQ(q::descriptors(q::kernel_set::avx2_fma)[4].dot_f32, &q::dot_q4_0_avx2);
}

TEST(QuantDescriptors, ForceScalarEnvironmentVariable) {
    // Restore whatever the caller set (e.g. a whole run under STRATA_FORCE_SCALAR=1) for the tests that follow.
    const char *outer = std::getenv("STRATA_FORCE_SCALAR");
    const std::string saved = outer != nullptr ? outer : "";
    const bool was_set = outer != nullptr;
    ASSERT_EQ(setenv("STRATA_FORCE_SCALAR", "1", 1), 0);
    EXPECT_EQ(q::select_kernel_set(), q::kernel_set::scalar);
    ASSERT_EQ(setenv("STRATA_FORCE_SCALAR", "0", 1), 0);
    EXPECT_EQ(q::select_kernel_set(), q::cpu_has_avx2_fma() ? q::kernel_set::avx2_fma : q::kernel_set::scalar);
    ASSERT_EQ(setenv("STRATA_FORCE_SCALAR", "", 1), 0);
    EXPECT_EQ(q::select_kernel_set(), q::cpu_has_avx2_fma() ? q::kernel_set::avx2_fma : q::kernel_set::scalar);
    ASSERT_EQ(unsetenv("STRATA_FORCE_SCALAR"), 0);
    EXPECT_EQ(q::select_kernel_set(), q::cpu_has_avx2_fma() ? q::kernel_set::avx2_fma : q::kernel_set::scalar);
    if (was_set) setenv("STRATA_FORCE_SCALAR", saved.c_str(), 1);
}

} // namespace
