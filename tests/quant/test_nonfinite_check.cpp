// find_nonfinite (ABI 1.10, llama.cpp's ggml_validate_row_data): -1 for rows the quantizer wrote, and the start of
// the first damaged block when a scale or minimum (F32/F16/BF16: a value) is set to NaN or infinity.
#include "ggml_quants.hpp"
#include "quant_test_data.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace q = strata::quants;

namespace {

// Byte offsets of every binary16 scale/min field in one block of each format (float formats: none, values instead).
struct scale_fields {
    const char *name;
    std::vector<int> offsets;
};

const scale_fields fields[] = {
    {"q8_0", {0}},   {"q4_0", {0}},      {"q4_1", {0, 2}},   {"q5_0", {0}},   {"q5_1", {0, 2}},
    {"iq4_nl", {0}}, {"q2_k", {80, 82}}, {"q3_k", {108}},    {"q4_k", {0, 2}}, {"q5_k", {0, 2}},
    {"q6_k", {208}}, {"iq4_xs", {0}},
};

const strata_quant_desc &find(const std::string &name) {
    const strata_quant_desc *table = q::descriptors(q::kernel_set::scalar);
    for (int i = 0; i < q::n_descriptors(); ++i)
        if (name == table[i].header.name) return table[i];
    throw std::runtime_error("no descriptor " + name);
}

TEST(NonfiniteCheck, EveryDescriptorHasIt) {
    for (auto set : {q::kernel_set::scalar, q::kernel_set::avx2_fma}) {
        const strata_quant_desc *table = q::descriptors(set);
        for (int i = 0; i < q::n_descriptors(); ++i) {
            ASSERT_TRUE(STRATA_HAS_SLOT(&table[i], find_nonfinite)) << table[i].header.name;
            EXPECT_NE(table[i].find_nonfinite, nullptr) << table[i].header.name;
        }
    }
}

TEST(NonfiniteCheck, FindsTheFirstBlockWithANanOrInfiniteScale) {
    for (const auto &f : fields) {
        const strata_quant_desc &d = find(f.name);
        const int64_t n = 4 * 256;
        const auto x = strata::quants::testing::normal_values(n, 3);
        std::vector<unsigned char> row(static_cast<size_t>(n / d.block_elems * d.block_bytes));
        d.quantize_row(x.data(), row.data(), n);
        EXPECT_EQ(d.find_nonfinite(row.data(), n), -1) << f.name;
        const int64_t blocks = n / d.block_elems;
        for (const int offset : f.offsets) {
            for (const uint16_t bad : {uint16_t{0x7c00}, uint16_t{0xfc00}, uint16_t{0x7e01}}) { // +inf, -inf, NaN
                for (const int64_t block : {int64_t{0}, blocks - 1, blocks / 2}) {
                    auto damaged = row;
                    std::memcpy(damaged.data() + block * d.block_bytes + offset, &bad, 2);
                    EXPECT_EQ(d.find_nonfinite(damaged.data(), n), block * d.block_elems)
                        << f.name << " field at byte " << offset << " value " << bad << " block " << block;
                }
            }
        }
        // The largest finite binary16 (65504) is a valid scale.
        auto big = row;
        const uint16_t max_half = 0x7bff;
        std::memcpy(big.data() + f.offsets[0], &max_half, 2);
        EXPECT_EQ(d.find_nonfinite(big.data(), n), -1) << f.name;
    }
}

TEST(NonfiniteCheck, FloatFormatsCheckEveryValue) {
    const float inf = std::numeric_limits<float>::infinity();
    for (const char *name : {"f32", "f16", "bf16"}) {
        const strata_quant_desc &d = find(name);
        std::vector<float> x(64, 1.5f);
        std::vector<unsigned char> row(64 * d.block_bytes);
        d.quantize_row(x.data(), row.data(), 64);
        EXPECT_EQ(d.find_nonfinite(row.data(), 64), -1) << name;
        x[37] = -inf;
        x[50] = std::numeric_limits<float>::quiet_NaN();
        d.quantize_row(x.data(), row.data(), 64);
        EXPECT_EQ(d.find_nonfinite(row.data(), 64), 37) << name;
    }
    // 1e5 is finite in float32 and bfloat16 but overflows binary16 (the F16 file itself then holds infinity).
    std::vector<float> x(8, 1e5f);
    std::vector<unsigned char> row(16);
    find("f16").quantize_row(x.data(), row.data(), 8);
    EXPECT_EQ(find("f16").find_nonfinite(row.data(), 8), 0);
}

} // namespace
