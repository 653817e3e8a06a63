// Every dot kernel (scalar and AVX2) against a float64 dot of the reference dequantization, over many lengths.
#include "ggml_quants.hpp"
#include "quant_test_data.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <iterator>
#include <string>
#include <vector>

namespace q = strata::quants;
using strata::quants::testing::normal_values;

namespace {

using dot_fn = float (*)(const void *, const float *, int64_t);

struct format_case {
    const char *name;
    int64_t block_elems;
    int64_t block_bytes;
    void (*quantize)(const float *, void *, int64_t);
    void (*dequantize)(const void *, float *, int64_t);
    dot_fn scalar;
    dot_fn avx2;
};

const format_case formats[] = {
    {"f32", 1, 4, q::quantize_row_f32, q::dequantize_row_f32, q::dot_f32_scalar, q::dot_f32_avx2},
    {"f16", 1, 2, q::quantize_row_f16, q::dequantize_row_f16, q::dot_f16_scalar, q::dot_f16_avx2},
    {"bf16", 1, 2, q::quantize_row_bf16, q::dequantize_row_bf16, q::dot_bf16_scalar, q::dot_bf16_avx2},
    {"q8_0", 32, 34, q::quantize_row_q8_0, q::dequantize_row_q8_0, q::dot_q8_0_scalar, q::dot_q8_0_avx2},
    {"q4_0", 32, 18, q::quantize_row_q4_0, q::dequantize_row_q4_0, q::dot_q4_0_scalar, q::dot_q4_0_avx2},
};

// Lengths hit every unrolled path: single blocks, the 4-block / 32-element main loops, their tails, and the row
// lengths of real models (4096, 11008).
std::vector<int64_t> lengths_for(int64_t block_elems) {
    std::vector<int64_t> blocks = {1, 2, 3, 4, 5, 7, 8, 9, 13, 31, 32, 33, 100, 128, 344};
    std::vector<int64_t> out;
    for (int64_t b : blocks) out.push_back(b * 32);
    out.push_back(4096);
    out.push_back(11008);
    if (block_elems == 1) { // element-wise formats also take lengths that are not multiples of 8
        for (int64_t n : {1, 2, 3, 7, 8, 9, 15, 17, 31, 33, 39, 41, 63, 65, 4097}) out.push_back(n);
    }
    return out;
}

// Checks `dot` on one quantized row against sum(dequant(row)[i] * x[i]) in float64. The float32 accumulation error
// scales with the sum of |terms|, so the tolerance does too (cancellation can make the result itself tiny).
void expect_dot_matches_reference(const format_case &f, dot_fn dot, const char *kernel) {
    for (int64_t n : lengths_for(f.block_elems)) {
        const auto w = normal_values(n, static_cast<uint32_t>(n * 7 + 1));
        const auto x = normal_values(n, static_cast<uint32_t>(n * 13 + 2));
        std::vector<uint8_t> row(static_cast<size_t>(n / f.block_elems * f.block_bytes) + 1); // +1: odd address
        uint8_t *row_data = row.data() + 1; // rows are byte-aligned in the ABI: test an unaligned one
        f.quantize(w.data(), row_data, n);
        std::vector<float> deq(static_cast<size_t>(n));
        f.dequantize(row_data, deq.data(), n);
        double expected = 0, magnitude = 0;
        for (int64_t i = 0; i < n; ++i) {
            expected += static_cast<double>(deq[i]) * x[i];
            magnitude += std::fabs(static_cast<double>(deq[i]) * x[i]);
        }
        const double got = dot(row_data, x.data(), n);
        EXPECT_NEAR(got, expected, 1e-5 * magnitude + 1e-30)
            << f.name << " " << kernel << " n=" << n << " (sum of |terms| " << magnitude << ")";
    }
}

TEST(DotKernels, ScalarMatchesFloat64Reference) {
    for (const auto &f : formats) expect_dot_matches_reference(f, f.scalar, "scalar");
}

TEST(DotKernels, Avx2MatchesFloat64Reference) {
    if (!q::cpu_has_avx2_fma()) GTEST_SKIP() << "CPU lacks AVX2/FMA/F16C (or this is not an x86-64 build)";
    for (const auto &f : formats) expect_dot_matches_reference(f, f.avx2, "avx2");
}

TEST(DotKernels, SelectedDescriptorKernelsMatchReference) {
    const strata_quant_desc *table = q::descriptors();
    // The first five descriptors are this file's formats, in its order (test_added_formats.cpp covers the rest).
    for (int i = 0; i < static_cast<int>(std::size(formats)); ++i) {
        ASSERT_STREQ(table[i].header.name, formats[i].name);
        expect_dot_matches_reference(formats[i], table[i].dot_f32, "descriptor");
    }
}

// Large-magnitude and sign-alternating data: a kernel that dropped a block scale or a nibble would be far off.
TEST(DotKernels, KernelsAgreeOnStructuredData) {
    const int64_t n = 4096;
    std::vector<float> w(n), x(n);
    for (int64_t i = 0; i < n; ++i) {
        w[i] = static_cast<float>((i % 37) - 18) * (i % 64 < 32 ? 1.0f : 100.0f);
        x[i] = (i % 2 == 0 ? 1.0f : -0.5f) * static_cast<float>(1 + i % 5);
    }
    for (const auto &f : formats) {
        std::vector<uint8_t> row(static_cast<size_t>(n / f.block_elems * f.block_bytes));
        f.quantize(w.data(), row.data(), n);
        std::vector<float> deq(n);
        f.dequantize(row.data(), deq.data(), n);
        double expected = 0, magnitude = 0;
        for (int64_t i = 0; i < n; ++i) {
            expected += static_cast<double>(deq[i]) * x[i];
            magnitude += std::fabs(static_cast<double>(deq[i]) * x[i]);
        }
        EXPECT_NEAR(f.scalar(row.data(), x.data(), n), expected, 1e-5 * magnitude) << f.name;
        if (q::cpu_has_avx2_fma()) {
            EXPECT_NEAR(f.avx2(row.data(), x.data(), n), expected, 1e-5 * magnitude) << f.name;
        }
    }
}

TEST(DotKernels, ZeroLengthIsZero) {
    const float x[1] = {1.0f};
    const uint8_t row[4] = {};
    for (const auto &f : formats) {
        EXPECT_EQ(f.scalar(row, x, 0), 0.0f) << f.name;
        if (q::cpu_has_avx2_fma()) {
            EXPECT_EQ(f.avx2(row, x, 0), 0.0f) << f.name;
        }
    }
}

} // namespace
