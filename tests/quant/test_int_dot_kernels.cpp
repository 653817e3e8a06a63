// The integer dot path (ABI 1.1): quantize_activations against the reference Q8_0 quantizer (bit for bit), dot_act
// (scalar and AVX2) against a float64 dot of dequant(row) . dequant(activations), and exact agreement of the scalar
// and AVX2 integer sums on data where every float step is exact.
#include "ggml_quants.hpp"
#include "quant_test_data.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace q = strata::quants;
using strata::quants::testing::normal_values;

namespace {

using quantize_fn = void (*)(const float *, void *, int64_t);
using dot_act_fn = float (*)(const void *, const void *, int64_t);

struct kernel_case {
    const char *name;
    quantize_fn quantize;
    dot_act_fn dot_q8_0, dot_q4_0;
};

std::vector<kernel_case> kernel_cases() {
    std::vector<kernel_case> out = {
        {"scalar", q::quantize_activations_q8_scalar, q::dot_act_q8_0_scalar, q::dot_act_q4_0_scalar}};
    if (q::cpu_has_avx2_fma())
        out.push_back({"avx2", q::quantize_activations_q8_avx2, q::dot_act_q8_0_avx2, q::dot_act_q4_0_avx2});
    return out;
}

float half_value(uint16_t h) { return q::fp16_to_fp32(h); }

uint32_t bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}

// Activations whose blocks hit the quantizer's corner cases: exact .5 ties (a block with max 127 has d = 1, so
// x = k + 0.5 lands on a tie), all zeros, one element only, infinities, values so small that 1/d overflows, a
// scale beyond binary16's range, and ordinary normal data.
std::vector<float> tricky_activations(int64_t n_blocks, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<float> x = normal_values(n_blocks * 32, seed);
    for (int64_t b = 0; b < n_blocks; ++b) {
        float *blk = x.data() + b * 32;
        switch (b % 8) {
        case 0:
            blk[0] = 127.0f;
            for (int j = 1; j < 32; ++j) blk[j] = static_cast<float>(static_cast<int>(rng() % 253) - 126) + 0.5f;
            break;
        case 1: std::fill(blk, blk + 32, 0.0f); break;
        case 2:
            std::fill(blk, blk + 32, 0.0f);
            blk[rng() % 32] = -3.25f;
            break;
        case 3:
            blk[5] = std::numeric_limits<float>::infinity();
            blk[9] = -std::numeric_limits<float>::infinity();
            break;
        case 4:
            for (int j = 0; j < 32; ++j) blk[j] *= 1e-40f; // subnormal: d rounds to ~0 and 1/d overflows
            break;
        case 5:
            for (int j = 0; j < 32; ++j) blk[j] *= 1e7f; // d overflows binary16 (stored as inf, as ggml does)
            break;
        case 6:
            for (int j = 0; j < 32; ++j) blk[j] *= 1e-6f; // d is a binary16 subnormal
            break;
        default: break;
        }
    }
    return x;
}

TEST(IntDotKernels, ActivationBlockLayout) {
    EXPECT_EQ(sizeof(q::block_q8_act), 40u);
    EXPECT_EQ(offsetof(q::block_q8_act, qs), 0u);
    EXPECT_EQ(offsetof(q::block_q8_act, d), 32u);
    EXPECT_EQ(offsetof(q::block_q8_act, sum_x8), 36u);
}

TEST(IntDotKernels, QuantizeActivationsIsBitExactWithReferenceQ8_0) {
    for (const kernel_case &k : kernel_cases()) {
        for (int64_t n_blocks : {1, 2, 3, 8, 24, 64, 344}) {
            const std::vector<float> x = tricky_activations(n_blocks, static_cast<uint32_t>(n_blocks * 31 + 7));
            std::vector<q::block_q8_0> ref(static_cast<size_t>(n_blocks));
            q::quantize_row_q8_0(x.data(), ref.data(), n_blocks * 32);
            std::vector<q::block_q8_act> got(static_cast<size_t>(n_blocks));
            k.quantize(x.data(), got.data(), n_blocks * 32);
            for (int64_t b = 0; b < n_blocks; ++b) {
                const std::string where = std::string(k.name) + " block " + std::to_string(b) + " of " +
                                          std::to_string(n_blocks);
                EXPECT_EQ(bits(got[b].d), bits(half_value(ref[b].d))) << where;
                int32_t sum = 0;
                for (int j = 0; j < 32; ++j) {
                    EXPECT_EQ(got[b].qs[j], ref[b].qs[j]) << where << " element " << j;
                    sum += ref[b].qs[j];
                }
                EXPECT_EQ(got[b].sum_x8, 8 * sum) << where;
            }
        }
    }
}

// Ties round away from zero, like roundf (the AVX2 code cannot use the CPU's round-to-nearest-even).
TEST(IntDotKernels, QuantizeActivationsRoundsTiesAwayFromZero) {
    float x[32] = {};
    x[0] = 127.0f; // d = 1, id = 1
    x[1] = 2.5f;
    x[2] = -2.5f;
    x[3] = 0.5f;
    x[4] = -0.5f;
    x[5] = 3.4999998f;
    for (const kernel_case &k : kernel_cases()) {
        q::block_q8_act a{};
        k.quantize(x, &a, 32);
        EXPECT_EQ(a.d, 1.0f) << k.name;
        EXPECT_EQ(a.qs[0], 127) << k.name;
        EXPECT_EQ(a.qs[1], 3) << k.name;
        EXPECT_EQ(a.qs[2], -3) << k.name;
        EXPECT_EQ(a.qs[3], 1) << k.name;
        EXPECT_EQ(a.qs[4], -1) << k.name;
        EXPECT_EQ(a.qs[5], 3) << k.name;
        EXPECT_EQ(a.sum_x8, 8 * (127 + 3 - 3 + 1 - 1 + 3)) << k.name;
    }
}

// dot_act(row, xq) against sum_i dequant(row)[i] * dequant(xq)[i] in float64. Each block's integer sum is exact;
// only the float scaling and the sum over blocks round, so the tolerance scales with the sum of |terms|.
TEST(IntDotKernels, DotActMatchesFloat64Reference) {
    struct weight_format {
        const char *name;
        int64_t block_bytes;
        quantize_fn quantize;
        void (*dequantize)(const void *, float *, int64_t);
        bool is_q4_0;
    };
    const weight_format formats[] = {{"q8_0", 34, q::quantize_row_q8_0, q::dequantize_row_q8_0, false},
                                     {"q4_0", 18, q::quantize_row_q4_0, q::dequantize_row_q4_0, true}};
    for (const kernel_case &k : kernel_cases()) {
        for (const weight_format &f : formats) {
            for (int64_t n_blocks : {1, 2, 3, 4, 5, 7, 24, 33, 128, 344}) {
                const int64_t n = n_blocks * 32;
                const auto w = normal_values(n, static_cast<uint32_t>(n * 3 + 1));
                const auto x = normal_values(n, static_cast<uint32_t>(n * 5 + 2), 2.0f);
                std::vector<uint8_t> row(static_cast<size_t>(n_blocks * f.block_bytes) + 1);
                uint8_t *row_data = row.data() + 1; // rows are only byte-aligned in the ABI
                f.quantize(w.data(), row_data, n);
                std::vector<q::block_q8_act> xq(static_cast<size_t>(n_blocks));
                k.quantize(x.data(), xq.data(), n);

                std::vector<float> deq(static_cast<size_t>(n));
                f.dequantize(row_data, deq.data(), n);
                double expected = 0, magnitude = 0;
                for (int64_t i = 0; i < n; ++i) {
                    const double a = static_cast<double>(xq[i / 32].qs[i % 32]) * xq[i / 32].d;
                    expected += static_cast<double>(deq[i]) * a;
                    magnitude += std::fabs(static_cast<double>(deq[i]) * a);
                }
                const float got = (f.is_q4_0 ? k.dot_q4_0 : k.dot_q8_0)(row_data, xq.data(), n);
                EXPECT_NEAR(got, expected, 1e-5 * magnitude + 1e-30)
                    << f.name << " " << k.name << " n=" << n << " (sum of |terms| " << magnitude << ")";

                // And the quantized activations barely move the result from the float one (what llama.cpp accepts).
                double exact = 0;
                for (int64_t i = 0; i < n; ++i) exact += static_cast<double>(deq[i]) * x[i];
                EXPECT_NEAR(got, exact, 2e-2 * magnitude) << f.name << " " << k.name << " n=" << n;
            }
        }
    }
}

// Blocks built by hand with power-of-two scales and quants small enough that every float step (the scale products,
// the per-lane partial sums, the sum over blocks) is exact: scalar, AVX2 and an int64 reference must agree bit for
// bit. Q8_0 weights include -128, which the quantizer never writes but a GGUF file may hold.
TEST(IntDotKernels, ScalarAndAvx2IntegerSumsAreIdentical) {
    std::mt19937 rng(99);
    const float scales[] = {1.0f, 0.5f, 0.25f, 0.125f};
    const uint16_t half_scales[] = {0x3c00, 0x3800, 0x3400, 0x3000}; // the same values as binary16
    for (int trial = 0; trial < 200; ++trial) {
        const int64_t n_blocks = 1 + trial % 8;
        const int64_t n = n_blocks * 32;
        std::vector<q::block_q8_0> w8(static_cast<size_t>(n_blocks));
        std::vector<q::block_q4_0> w4(static_cast<size_t>(n_blocks));
        std::vector<q::block_q8_act> a8(static_cast<size_t>(n_blocks)), a4(static_cast<size_t>(n_blocks));
        double want8 = 0, want4 = 0;
        for (int64_t b = 0; b < n_blocks; ++b) {
            const int sw = static_cast<int>(rng() % 4), sa = static_cast<int>(rng() % 4);
            w8[b].d = half_scales[sw];
            w4[b].d = half_scales[sw];
            a8[b].d = scales[sa];
            a4[b].d = scales[sa];
            int64_t dot8 = 0, dot4 = 0;
            int32_t sum8 = 0, sum4 = 0;
            for (int j = 0; j < 32; ++j) {
                w8[b].qs[j] = static_cast<int8_t>(static_cast<int>(rng() % 256) - 128); // [-128, 127]
                a8[b].qs[j] = static_cast<int8_t>(static_cast<int>(rng() % 15) - 7);    // [-7, 7]
                a4[b].qs[j] = static_cast<int8_t>(static_cast<int>(rng() % 201) - 100); // [-100, 100]
                sum8 += a8[b].qs[j];
                sum4 += a4[b].qs[j];
                dot8 += int64_t{w8[b].qs[j]} * a8[b].qs[j];
            }
            for (int j = 0; j < 16; ++j) {
                w4[b].qs[j] = static_cast<uint8_t>(rng() & 0xff);
                dot4 += int64_t{(w4[b].qs[j] & 0x0f) - 8} * a4[b].qs[j] + int64_t{(w4[b].qs[j] >> 4) - 8} * a4[b].qs[j + 16];
            }
            a8[b].sum_x8 = 8 * sum8;
            a4[b].sum_x8 = 8 * sum4;
            want8 += static_cast<double>(dot8) * scales[sw] * scales[sa];
            want4 += static_cast<double>(dot4) * scales[sw] * scales[sa];
        }
        for (const kernel_case &k : kernel_cases()) {
            EXPECT_EQ(k.dot_q8_0(w8.data(), a8.data(), n), static_cast<float>(want8)) << k.name << " trial " << trial;
            EXPECT_EQ(k.dot_q4_0(w4.data(), a4.data(), n), static_cast<float>(want4)) << k.name << " trial " << trial;
        }
        ASSERT_EQ(static_cast<double>(static_cast<float>(want8)), want8) << "test data must be exact in float";
        ASSERT_EQ(static_cast<double>(static_cast<float>(want4)), want4) << "test data must be exact in float";
    }
}

TEST(IntDotKernels, DescriptorsOfferTheIntegerPathOnlyForBlockFormats) {
    // Activation blocks: Q8_0-valued block_q8_act for the 32-element formats, Q8_K for the 256-element ones.
    for (auto set : {q::kernel_set::scalar, q::kernel_set::avx2_fma}) {
        const strata_quant_desc *table = q::descriptors(set);
        for (int i = 0; i < q::n_descriptors(); ++i) {
            const strata_quant_desc &d = table[i];
            const bool block_format = d.block_elems > 1;
            EXPECT_EQ(STRATA_HAS_SLOT(&d, dot_act), block_format) << d.header.name;
            EXPECT_EQ(STRATA_HAS_SLOT(&d, quantize_activations), block_format) << d.header.name;
            const uint32_t act_bytes = d.block_elems == 32    ? sizeof(q::block_q8_act)
                                       : d.block_elems == 256 ? sizeof(q::block_q8_k)
                                                              : 0u;
            EXPECT_EQ(d.act_block_bytes, act_bytes) << d.header.name;
            EXPECT_EQ(d.reserved_1_1, 0u) << d.header.name;
        }
    }
    const bool avx2 = q::cpu_has_avx2_fma();
    EXPECT_EQ(q::descriptors(q::kernel_set::scalar)[3].dot_act, &q::dot_act_q8_0_scalar);
    EXPECT_EQ(q::descriptors(q::kernel_set::scalar)[4].dot_act, &q::dot_act_q4_0_scalar);
    EXPECT_EQ(q::descriptors(q::kernel_set::avx2_fma)[4].dot_act, &q::dot_act_q4_0_avx2);
    EXPECT_EQ(q::descriptors(q::kernel_set::avx2_fma)[3].quantize_activations, &q::quantize_activations_q8_avx2);
    (void)avx2;
}

// A descriptor compiled against ABI 1.0 (struct_size ends after kernel_name) must read as "no integer path".
TEST(IntDotKernels, OlderDescriptorSizeHidesTheSlots) {
    strata_quant_desc d = q::descriptors(q::kernel_set::scalar)[3];
    d.header.struct_size = static_cast<uint32_t>(offsetof(strata_quant_desc, kernel_name) + sizeof(d.kernel_name));
    EXPECT_TRUE(STRATA_HAS_SLOT(&d, kernel_name));
    EXPECT_FALSE(STRATA_HAS_SLOT(&d, quantize_activations));
    EXPECT_FALSE(STRATA_HAS_SLOT(&d, dot_act));
}

TEST(IntDotKernels, ZeroLengthIsZero) {
    q::block_q8_act a{};
    q::block_q8_0 w8{};
    q::block_q4_0 w4{};
    for (const kernel_case &k : kernel_cases()) {
        EXPECT_EQ(k.dot_q8_0(&w8, &a, 0), 0.0f) << k.name;
        EXPECT_EQ(k.dot_q4_0(&w4, &a, 0), 0.0f) << k.name;
    }
}

} // namespace
