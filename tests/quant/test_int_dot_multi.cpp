// dot_act_multi (ABI 1.2): one weight row against several activation vectors. Every output must equal dot_act's for
// the same vector and kernel set bit for bit, AVX-VNNI against the AVX2 dot_act included (that is what keeps greedy
// tokens independent of the prefill chunk size), scalar and AVX2 must agree where the float steps are exact, and
// nothing past out[n_x - 1] is written.
#include "ggml_quants.hpp"
#include "quant_test_data.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace q = strata::quants;
using strata::quants::testing::normal_values;

namespace {

using dot_act_fn = float (*)(const void *, const void *, int64_t);
using dot_act_multi_fn = void (*)(const void *, const void *, int64_t, int32_t, int64_t, float *);
using quantize_fn = void (*)(const float *, void *, int64_t);

struct multi_case {
    std::string name; // "<kernel set> <format>"
    quantize_fn quantize_activations;
    dot_act_fn dot_act;
    dot_act_multi_fn dot_act_multi;
    uint32_t ggml_type;
};

std::vector<multi_case> multi_cases() {
    std::vector<multi_case> out = {
        {"scalar q8_0", q::quantize_activations_q8_scalar, q::dot_act_q8_0_scalar, q::dot_act_multi_q8_0_scalar,
         q::ggml_type_q8_0},
        {"scalar q4_0", q::quantize_activations_q8_scalar, q::dot_act_q4_0_scalar, q::dot_act_multi_q4_0_scalar,
         q::ggml_type_q4_0}};
    if (q::cpu_has_avx2_fma()) {
        out.push_back({"avx2 q8_0", q::quantize_activations_q8_avx2, q::dot_act_q8_0_avx2, q::dot_act_multi_q8_0_avx2,
                       q::ggml_type_q8_0});
        out.push_back({"avx2 q4_0", q::quantize_activations_q8_avx2, q::dot_act_q4_0_avx2, q::dot_act_multi_q4_0_avx2,
                       q::ggml_type_q4_0});
        out.push_back({"avx2-or-vnni q8_0", q::quantize_activations_q8_avx2, q::dot_act_q8_0_avx2,
                       q::dot_act_multi_q8_0_avx2_or_vnni, q::ggml_type_q8_0});
        out.push_back({"avx2-or-vnni q4_0", q::quantize_activations_q8_avx2, q::dot_act_q4_0_avx2,
                       q::dot_act_multi_q4_0_avx2_or_vnni, q::ggml_type_q4_0});
    }
    if (q::cpu_has_avx_vnni()) {
        out.push_back({"avxvnni q8_0", q::quantize_activations_q8_avx2, q::dot_act_q8_0_avx2,
                       q::dot_act_multi_q8_0_avxvnni, q::ggml_type_q8_0});
        out.push_back({"avxvnni q4_0", q::quantize_activations_q8_avx2, q::dot_act_q4_0_avx2,
                       q::dot_act_multi_q4_0_avxvnni, q::ggml_type_q4_0});
    }
    return out;
}

uint32_t bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}

std::vector<unsigned char> quantized_row(uint32_t ggml_type, const std::vector<float> &w) {
    const auto n = static_cast<int64_t>(w.size());
    if (ggml_type == q::ggml_type_q8_0) {
        std::vector<unsigned char> row(static_cast<size_t>(n / 32) * sizeof(q::block_q8_0));
        q::quantize_row_q8_0(w.data(), row.data(), n);
        return row;
    }
    std::vector<unsigned char> row(static_cast<size_t>(n / 32) * sizeof(q::block_q4_0));
    q::quantize_row_q4_0(w.data(), row.data(), n);
    return row;
}

// Real-looking data: rows and activations with per-block magnitudes spread over several decades, vectors laid out
// with a stride larger than one vector (as a device may pad), n_x from 1 to 9 (every tail of the 4- and 8-wide
// groups) plus 16 and 17, and odd and even block counts.
TEST(IntDotMulti, EqualsDotActPerVectorBitForBit) {
    for (const multi_case &k : multi_cases()) {
        for (int64_t n_blocks : {1, 2, 3, 7, 24, 64}) {
            const int64_t n = n_blocks * 32;
            std::vector<float> w = normal_values(n, static_cast<uint32_t>(n_blocks));
            for (int64_t i = 0; i < n; ++i) w[i] *= 1.0f + static_cast<float>((i / 32) % 5) * 10.0f;
            const std::vector<unsigned char> row = quantized_row(k.ggml_type, w);
            const int64_t vector_bytes = n_blocks * static_cast<int64_t>(sizeof(q::block_q8_act));
            const int64_t stride = vector_bytes + 48;
            for (int32_t n_x : {1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 17}) {
                std::vector<unsigned char> xq(static_cast<size_t>(stride * n_x), 0xab);
                for (int32_t i = 0; i < n_x; ++i) {
                    std::vector<float> x = normal_values(n, 1000u + static_cast<uint32_t>(i * 7 + n_blocks));
                    for (int64_t j = 0; j < n; ++j) x[j] *= 0.01f + static_cast<float>((j / 32 + i) % 3);
                    k.quantize_activations(x.data(), xq.data() + i * stride, n);
                }
                std::vector<float> out(static_cast<size_t>(n_x) + 1, -12345.0f);
                k.dot_act_multi(row.data(), xq.data(), stride, n_x, n, out.data());
                for (int32_t i = 0; i < n_x; ++i)
                    ASSERT_EQ(bits(out[i]), bits(k.dot_act(row.data(), xq.data() + i * stride, n)))
                        << k.name << ": " << n_blocks << " blocks, vector " << i << " of " << n_x;
                EXPECT_EQ(out[n_x], -12345.0f) << k.name << ": wrote past out[n_x - 1] with n_x = " << n_x;
            }
        }
    }
}

// Weights and activations whose every product and partial sum is exact in float (power-of-two scales, small
// quants): scalar and AVX2 multi kernels must both give the exact float64 result.
TEST(IntDotMulti, ScalarAndAvx2AgreeWithExactSums) {
    std::mt19937 rng(7);
    const float scales[] = {1.0f, 0.5f, 0.25f, 0.125f};
    const uint16_t half_scales[] = {0x3c00, 0x3800, 0x3400, 0x3000}; // the same values as binary16
    for (int trial = 0; trial < 40; ++trial) {
        const int64_t n_blocks = 1 + trial % 6;
        const int64_t n = n_blocks * 32;
        const int32_t n_x = 1 + trial % 9;
        std::vector<q::block_q8_0> w8(static_cast<size_t>(n_blocks));
        std::vector<q::block_q4_0> w4(static_cast<size_t>(n_blocks));
        std::vector<int> sw(static_cast<size_t>(n_blocks));
        for (int64_t b = 0; b < n_blocks; ++b) {
            sw[b] = static_cast<int>(rng() % 4);
            w8[b].d = w4[b].d = half_scales[sw[b]];
            for (int j = 0; j < 32; ++j) w8[b].qs[j] = static_cast<int8_t>(static_cast<int>(rng() % 256) - 128);
            for (int j = 0; j < 16; ++j) w4[b].qs[j] = static_cast<uint8_t>(rng() & 0xff);
        }
        std::vector<q::block_q8_act> a(static_cast<size_t>(n_blocks * n_x));
        std::vector<double> want8(static_cast<size_t>(n_x)), want4(static_cast<size_t>(n_x));
        for (int32_t i = 0; i < n_x; ++i)
            for (int64_t b = 0; b < n_blocks; ++b) {
                q::block_q8_act &blk = a[static_cast<size_t>(i * n_blocks + b)];
                const int sa = static_cast<int>(rng() % 4);
                blk.d = scales[sa];
                int32_t sum = 0;
                int64_t dot8 = 0, dot4 = 0;
                for (int j = 0; j < 32; ++j) {
                    blk.qs[j] = static_cast<int8_t>(static_cast<int>(rng() % 15) - 7); // [-7, 7]
                    sum += blk.qs[j];
                    dot8 += int64_t{w8[b].qs[j]} * blk.qs[j];
                }
                for (int j = 0; j < 16; ++j)
                    dot4 += int64_t{(w4[b].qs[j] & 0x0f) - 8} * blk.qs[j] +
                            int64_t{(w4[b].qs[j] >> 4) - 8} * blk.qs[j + 16];
                blk.sum_x8 = 8 * sum;
                want8[i] += static_cast<double>(dot8) * scales[sw[b]] * scales[sa];
                want4[i] += static_cast<double>(dot4) * scales[sw[b]] * scales[sa];
            }
        const int64_t stride = n_blocks * static_cast<int64_t>(sizeof(q::block_q8_act));
        for (const multi_case &k : multi_cases()) {
            const bool is_q8 = k.ggml_type == q::ggml_type_q8_0;
            const void *row = is_q8 ? static_cast<const void *>(w8.data()) : static_cast<const void *>(w4.data());
            std::vector<float> out(static_cast<size_t>(n_x));
            k.dot_act_multi(row, a.data(), stride, n_x, n, out.data());
            for (int32_t i = 0; i < n_x; ++i) {
                const double want = is_q8 ? want8[i] : want4[i];
                ASSERT_EQ(static_cast<double>(static_cast<float>(want)), want) << "test data must be exact in float";
                EXPECT_EQ(out[i], static_cast<float>(want)) << k.name << " trial " << trial << " vector " << i;
            }
        }
    }
}

TEST(IntDotMulti, DescriptorsOfferItWithDotAct) {
    for (auto set : {q::kernel_set::scalar, q::kernel_set::avx2_fma}) {
        const strata_quant_desc *table = q::descriptors(set);
        for (int i = 0; i < q::n_descriptors(); ++i)
            EXPECT_EQ(STRATA_HAS_SLOT(&table[i], dot_act_multi), STRATA_HAS_SLOT(&table[i], dot_act))
                << table[i].header.name;
    }
    EXPECT_EQ(q::descriptors(q::kernel_set::scalar)[3].dot_act_multi, &q::dot_act_multi_q8_0_scalar);
    EXPECT_EQ(q::descriptors(q::kernel_set::scalar)[4].dot_act_multi, &q::dot_act_multi_q4_0_scalar);
    EXPECT_EQ(q::descriptors(q::kernel_set::avx2_fma)[3].dot_act_multi, &q::dot_act_multi_q8_0_avx2_or_vnni);
    EXPECT_EQ(q::descriptors(q::kernel_set::avx2_fma)[4].dot_act_multi, &q::dot_act_multi_q4_0_avx2_or_vnni);
}

// A descriptor compiled against ABI 1.1 (struct_size ends after dot_act) must read as "no multi kernel".
TEST(IntDotMulti, AbiOnePointOneDescriptorHidesTheSlot) {
    strata_quant_desc d = q::descriptors(q::kernel_set::scalar)[4];
    d.header.struct_size = static_cast<uint32_t>(offsetof(strata_quant_desc, dot_act) + sizeof(d.dot_act));
    EXPECT_TRUE(STRATA_HAS_SLOT(&d, dot_act));
    EXPECT_FALSE(STRATA_HAS_SLOT(&d, dot_act_multi));
}

} // namespace
