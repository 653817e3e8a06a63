// The formats added after Q8_0/Q4_0 (Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K..Q6_K, IQ4_XS), through the descriptor tables
// the plugin exports: every dot kernel (float and integer path, scalar and AVX2) against a float64 dot of the
// dequantized operands, dot_act_multi equal to dot_act bit for bit, the scalar, AVX2 and AVX-512 integer paths equal
// bit for bit (rows of even and odd block counts), the K-quant activation quantizer equal to the Q8_K reference, and quantization
// error within each format's expected range. Bit-exactness of the quantizers against ggml is tests/peer's
// quant_vs_ggml.
#include "ggml_quants.hpp"
#include "quant_test_data.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace q = strata::quants;
using strata::quants::testing::normal_values;

namespace {

const char *const added_names[] = {"q4_1", "q5_0", "q5_1", "iq4_nl", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "iq4_xs"};

const strata_quant_desc *find(q::kernel_set set, const std::string &name) {
    const strata_quant_desc *table = q::descriptors(set);
    for (int i = 0; i < q::n_descriptors(); ++i) {
        if (name == table[i].header.name) return &table[i];
    }
    return nullptr;
}

std::vector<q::kernel_set> kernel_sets() {
    std::vector<q::kernel_set> sets = {q::kernel_set::scalar};
    if (q::cpu_has_avx2_fma()) sets.push_back(q::kernel_set::avx2_fma);
    return sets;
}

// Weights with varied magnitudes per 32 elements (so the K-quants' group scales differ) and one outlier per row.
std::vector<float> weight_values(int64_t n, uint32_t seed) {
    std::vector<float> w = normal_values(n, seed);
    for (int64_t i = 0; i < n; ++i) w[i] *= 0.05f * static_cast<float>(1 + (i / 32) % 7);
    w[static_cast<size_t>(seed % static_cast<uint32_t>(n))] *= 20.0f;
    return w;
}

struct quantized_row {
    std::vector<unsigned char> bytes;
    std::vector<float> values; // dequantized
};

quantized_row quantize(const strata_quant_desc &d, const std::vector<float> &x) {
    const auto n = static_cast<int64_t>(x.size());
    quantized_row r;
    r.bytes.resize(static_cast<size_t>(n / d.block_elems * d.block_bytes));
    r.values.resize(x.size());
    d.quantize_row(x.data(), r.bytes.data(), n);
    d.dequantize_row(r.bytes.data(), r.values.data(), n);
    return r;
}

double dot64(const std::vector<float> &a, const float *b) {
    double s = 0;
    for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
    return s;
}

double abs_dot64(const std::vector<float> &a, const float *b) {
    double s = 0;
    for (size_t i = 0; i < a.size(); ++i) s += std::fabs(static_cast<double>(a[i]) * b[i]);
    return s;
}

TEST(AddedFormats, EveryFormatIsInBothTablesWithTheIntegerPath) {
    for (const auto set : kernel_sets()) {
        for (const char *name : added_names) {
            const strata_quant_desc *d = find(set, name);
            ASSERT_NE(d, nullptr) << name;
            EXPECT_NE(d->dot_f32, nullptr) << name;
            EXPECT_GT(d->act_block_bytes, 0u) << name;
            EXPECT_NE(d->quantize_activations, nullptr) << name;
            EXPECT_NE(d->dot_act, nullptr) << name;
            EXPECT_NE(d->dot_act_multi, nullptr) << name;
            EXPECT_TRUE(d->block_elems == 32 || d->block_elems == 256) << name;
        }
    }
}

// Float dot: sum over blocks of the dequantized block times x, in float: within 1e-5 of sum |w x| of the float64.
TEST(AddedFormats, FloatDotMatchesFloat64) {
    for (const auto set : kernel_sets()) {
        for (const char *name : added_names) {
            const strata_quant_desc &d = *find(set, name);
            const int64_t n = 4096;
            const auto row = quantize(d, weight_values(n, 11));
            const auto x = normal_values(n, 12);
            const double want = dot64(row.values, x.data());
            const double bound = 1e-5 * abs_dot64(row.values, x.data());
            EXPECT_NEAR(d.dot_f32(row.bytes.data(), x.data(), n), want, bound)
                << name << " " << q::kernel_set_name(set);
        }
    }
}

// Integer path: dot_act equals the float64 dot of dequant(row) and dequant(activations); the integer sums are exact,
// so only a few float roundings per block separate them.
TEST(AddedFormats, IntegerDotMatchesFloat64OfDequantizedOperands) {
    for (const auto set : kernel_sets()) {
        for (const char *name : added_names) {
            const strata_quant_desc &d = *find(set, name);
            for (const int64_t n : {int64_t{256}, int64_t{4096}}) {
                const auto row = quantize(d, weight_values(n, 21));
                const auto x = normal_values(n, 22);
                std::vector<unsigned char> xq(static_cast<size_t>(n / d.block_elems * d.act_block_bytes));
                d.quantize_activations(x.data(), xq.data(), n);
                // The activations' dequantized values: Q8_0 blocks for 32-element formats, Q8_K for the others.
                std::vector<float> xa(static_cast<size_t>(n));
                if (d.block_elems == 256) {
                    q::dequantize_row_q8_k(xq.data(), xa.data(), n);
                } else {
                    const auto *a = reinterpret_cast<const q::block_q8_act *>(xq.data());
                    for (int64_t i = 0; i < n; ++i) xa[i] = a[i / 32].d * a[i / 32].qs[i % 32];
                }
                const double want = dot64(row.values, xa.data());
                const double bound = 2e-6 * abs_dot64(row.values, xa.data()) + 1e-30;
                EXPECT_NEAR(d.dot_act(row.bytes.data(), xq.data(), n), want, bound)
                    << name << " " << q::kernel_set_name(set) << " n " << n;
                // And the quantized activations are close to x (the path's only approximation).
                EXPECT_NEAR(dot64(row.values, x.data()), want, 0.02 * abs_dot64(row.values, x.data())) << name;
            }
        }
    }
}

TEST(AddedFormats, KQuantActivationsAreTheQ8KReference) {
    for (const auto set : kernel_sets()) {
        for (const char *name : {"q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "iq4_xs"}) {
            const strata_quant_desc &d = *find(set, name);
            ASSERT_EQ(d.act_block_bytes, sizeof(q::block_q8_k));
            auto x = normal_values(1024, 31);
            std::fill(x.begin() + 256, x.begin() + 512, 0.0f); // an all-zero block
            std::vector<unsigned char> got(4 * sizeof(q::block_q8_k)), want(got.size());
            d.quantize_activations(x.data(), got.data(), 1024);
            q::quantize_row_q8_k(x.data(), want.data(), 1024);
            EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size())) << name;
        }
    }
}

// The AVX2 activation quantizer (blocks of finite values, eight at a time) writes the reference's bytes for every
// block: random scales from 1e-30 to 1e30, the largest magnitude at both signs and tied between them (the first one
// sets the sign of the scale), values on rounding midpoints, subnormals, and blocks the reference handles itself
// (all zero, a NaN, an infinity).
TEST(AddedFormats, KQuantActivationQuantizerOfEachKernelSetWritesTheReferenceBytes) {
    std::mt19937 rng(77);
    std::uniform_real_distribution<float> exponent(-30.0f, 30.0f);
    constexpr int blocks = 400;
    std::vector<float> x(static_cast<size_t>(blocks * q::qk_k));
    for (int b = 0; b < blocks; ++b) {
        float *xb = x.data() + b * q::qk_k;
        const auto v = normal_values(q::qk_k, 500 + static_cast<uint32_t>(b), std::pow(10.0f, exponent(rng)));
        std::copy(v.begin(), v.end(), xb);
        switch (b % 8) {
        case 1: xb[b % q::qk_k] = -1e3f * std::fabs(xb[0]) - 1.0f; break;                // a negative largest
        case 2: xb[3] = 5.0f; xb[200] = -5.0f; break;                                    // tied, positive first
        case 3: xb[7] = -5.0f; xb[9] = 5.0f; break;                                      // tied, negative first
        case 4: for (int j = 0; j < q::qk_k; ++j) xb[j] = 0.5f * static_cast<float>(j % 255 - 127); break; // midpoints
        case 5: for (int j = 0; j < q::qk_k; ++j) xb[j] = 1e-42f * static_cast<float>(j % 7 - 3); break; // subnormal
        case 6:
            xb[11] = (b / 8) % 3 == 0   ? std::numeric_limits<float>::quiet_NaN()
                     : (b / 8) % 3 == 1 ? std::numeric_limits<float>::infinity()
                                        : -std::numeric_limits<float>::infinity();
            break;
        case 7: std::fill(xb, xb + q::qk_k, (b / 8) % 2 == 0 ? 0.0f : -0.0f); break;
        default: break;
        }
    }
    std::vector<unsigned char> want(static_cast<size_t>(blocks) * sizeof(q::block_q8_k));
    q::quantize_activations_q8k(x.data(), want.data(), static_cast<int64_t>(x.size()));
    for (const auto set : kernel_sets()) {
        const strata_quant_desc &d = *find(set, "q4_k");
        std::vector<unsigned char> got(want.size(), 0xAA);
        d.quantize_activations(x.data(), got.data(), static_cast<int64_t>(x.size()));
        for (int b = 0; b < blocks; ++b)
            EXPECT_EQ(0, std::memcmp(got.data() + b * sizeof(q::block_q8_k), want.data() + b * sizeof(q::block_q8_k),
                                     sizeof(q::block_q8_k)))
                << q::kernel_set_name(set) << " block " << b << " (kind " << b % 8 << ")";
    }
}

// dot_act_multi: out[i] == dot_act(row, xq_i) bit for bit for every count (the kernels tile by 4 and 8) and a
// stride larger than one activation row.
TEST(AddedFormats, MultiEqualsSingleBitForBit) {
    for (const auto set : kernel_sets()) {
        for (const char *name : added_names) {
            const strata_quant_desc &d = *find(set, name);
            const int64_t n = 1024;
            const auto row = quantize(d, weight_values(n, 41));
            const int64_t act_row = n / d.block_elems * d.act_block_bytes;
            const int64_t stride = act_row + 64;
            constexpr int32_t max_x = 11;
            std::vector<unsigned char> xq(static_cast<size_t>(stride * max_x));
            for (int32_t i = 0; i < max_x; ++i) {
                const auto x = normal_values(n, 100 + static_cast<uint32_t>(i), 0.5f + i);
                d.quantize_activations(x.data(), xq.data() + i * stride, n);
            }
            for (int32_t n_x = 1; n_x <= max_x; ++n_x) {
                std::vector<float> out(static_cast<size_t>(n_x), -1.0f);
                d.dot_act_multi(row.bytes.data(), xq.data(), stride, n_x, n, out.data());
                for (int32_t i = 0; i < n_x; ++i) {
                    const float single = d.dot_act(row.bytes.data(), xq.data() + i * stride, n);
                    uint32_t a, b;
                    std::memcpy(&a, &out[i], 4);
                    std::memcpy(&b, &single, 4);
                    EXPECT_EQ(a, b) << name << " " << q::kernel_set_name(set) << " n_x " << n_x << " i " << i;
                }
            }
        }
    }
}

// Scalar and AVX2 reach the same integers and evaluate the same float expression per block (no FMA contraction in
// either), so the integer paths agree bit for bit.
TEST(AddedFormats, ScalarAndAvx2IntegerPathsAgree) {
    if (!q::cpu_has_avx2_fma()) GTEST_SKIP() << "this CPU has no AVX2+FMA";
    for (const char *name : added_names) {
        const strata_quant_desc &s = *find(q::kernel_set::scalar, name);
        const strata_quant_desc &v = *find(q::kernel_set::avx2_fma, name);
        // An even block count, and an odd one (the 32-element kernels' last block goes to the even accumulator alone).
        for (const int64_t n : {int64_t{2048}, int64_t{s.block_elems} * 13}) {
            const auto row = quantize(s, weight_values(n, 51));
            const auto x = normal_values(n, 52);
            std::vector<unsigned char> xq(static_cast<size_t>(n / s.block_elems * s.act_block_bytes)), xv(xq.size());
            s.quantize_activations(x.data(), xq.data(), n);
            v.quantize_activations(x.data(), xv.data(), n);
            ASSERT_EQ(0, std::memcmp(xq.data(), xv.data(), xq.size())) << name << " n " << n;
            const float a = s.dot_act(row.bytes.data(), xq.data(), n);
            const float b = v.dot_act(row.bytes.data(), xq.data(), n);
            EXPECT_EQ(a, b) << name << " n " << n;
        }
    }
}

// The AVX-512 dots (picked by the AVX2 table on CPUs with AVX-512 F/BW/VL/VNNI) reach the AVX2 kernel's int32 lane
// sums (the K-quants two chunks at a time, the 32-element formats with one vpdpbusd per block) and add them to the
// float lanes with the same FMAs: every output, for every count of activation vectors (passes of 8, 4 and the rest),
// equals the scalar and the plain AVX2 kernels' bits, on rows of every scale and on activations at the int8 extremes
// (|q| = 127 everywhere: the largest pair sums).
TEST(AddedFormats, Avx512IntegerPathEqualsAvx2AndScalar) {
    if (!q::cpu_has_avx512_vnni()) GTEST_SKIP() << "this CPU has no AVX-512 F/BW/VL/VNNI; the AVX2 kernels run here";
    for (const char *name : added_names) {
        const strata_quant_desc &s = *find(q::kernel_set::scalar, name);
        const q::format_kernels avx2 = q::added_format_kernels_avx2(s.ggml_type);
        const q::format_kernels avx512 = q::added_format_kernels_avx512(s.ggml_type);
        ASSERT_NE(avx512.dot_act_multi, avx2.dot_act_multi) << name << ": no AVX-512 kernel";
        EXPECT_EQ(find(q::kernel_set::avx2_fma, name)->dot_act_multi, avx512.dot_act_multi)
            << name << ": the AVX2 table should carry the AVX-512 kernel on this CPU";
        const int64_t n = s.block_elems == 32 ? 32 * 33 : 1024; // an odd block count: the 32-element kernels' tail
        const int64_t act_row = n / s.block_elems * s.act_block_bytes;
        const int64_t stride = act_row + 32;
        constexpr int32_t max_x = 19;
        std::vector<unsigned char> xq(static_cast<size_t>(stride * max_x));
        for (int32_t i = 0; i < max_x; ++i) {
            std::vector<float> x = normal_values(n, 300 + static_cast<uint32_t>(i), 0.25f + i);
            if (i % 5 == 4) // every element at the scale's extreme: q = +-127 throughout
                for (int64_t j = 0; j < n; ++j) x[static_cast<size_t>(j)] = (j * 7 + i) % 3 == 0 ? -3.0f : 3.0f;
            s.quantize_activations(x.data(), xq.data() + i * stride, n);
        }
        for (uint32_t seed : {61u, 62u, 63u}) {
            const auto row = quantize(s, weight_values(n, seed));
            std::vector<float> reference(static_cast<size_t>(max_x));
            for (int32_t i = 0; i < max_x; ++i)
                reference[static_cast<size_t>(i)] = s.dot_act(row.bytes.data(), xq.data() + i * stride, n);
            for (int32_t n_x = 1; n_x <= max_x; ++n_x) {
                std::vector<float> wide(static_cast<size_t>(n_x), -1.0f), narrow(wide);
                avx512.dot_act_multi(row.bytes.data(), xq.data(), stride, n_x, n, wide.data());
                avx2.dot_act_multi(row.bytes.data(), xq.data(), stride, n_x, n, narrow.data());
                for (int32_t i = 0; i < n_x; ++i) {
                    uint32_t a, b, r;
                    std::memcpy(&a, &wide[static_cast<size_t>(i)], 4);
                    std::memcpy(&b, &narrow[static_cast<size_t>(i)], 4);
                    std::memcpy(&r, &reference[static_cast<size_t>(i)], 4);
                    EXPECT_EQ(a, r) << name << " seed " << seed << " n_x " << n_x << " i " << i << " (vs scalar)";
                    EXPECT_EQ(b, r) << name << " seed " << seed << " n_x " << n_x << " i " << i << " (avx2 vs scalar)";
                }
            }
            for (int32_t i = 0; i < max_x; ++i)
                EXPECT_EQ(avx512.dot_act(row.bytes.data(), xq.data() + i * stride, n), reference[static_cast<size_t>(i)])
                    << name << " dot_act, vector " << i;
        }
    }
}

// STRATA_NO_AVX512 (anything but "" or "0") makes cpu_has_avx512_vnni() say no, so plugins loaded under it keep to
// their AVX2 kernels; unset, "" and "0" leave the CPU's answer.
TEST(AddedFormats, StrataNoAvx512TurnsTheAvx512KernelsOff) {
    const char *was = std::getenv("STRATA_NO_AVX512");
    const std::string saved = was != nullptr ? was : "";
    ::unsetenv("STRATA_NO_AVX512");
    const bool cpu = q::cpu_has_avx512_vnni();
    ::setenv("STRATA_NO_AVX512", "1", 1);
    EXPECT_FALSE(q::cpu_has_avx512_vnni());
    ::setenv("STRATA_NO_AVX512", "0", 1);
    EXPECT_EQ(q::cpu_has_avx512_vnni(), cpu);
    ::setenv("STRATA_NO_AVX512", "", 1);
    EXPECT_EQ(q::cpu_has_avx512_vnni(), cpu);
    if (was != nullptr) ::setenv("STRATA_NO_AVX512", saved.c_str(), 1);
    else ::unsetenv("STRATA_NO_AVX512");
    if (!cpu) GTEST_SKIP() << "this CPU has no AVX-512 F/BW/VL/VNNI: only the 'off' half could be seen";
}

// Root-mean-square quantization error relative to the data's RMS, for normal data: each format lands in its known
// range (more bits, less error), which catches a quantizer that writes valid but poor blocks.
TEST(AddedFormats, QuantizationErrorIsWithinTheFormatsRange) {
    const struct {
        const char *name;
        double max_relative_rms;
    } limits[] = {{"q4_1", 0.11}, {"q5_0", 0.06}, {"q5_1", 0.05}, {"iq4_nl", 0.10}, {"q2_k", 0.40},
                  {"q3_k", 0.20}, {"q4_k", 0.10}, {"q5_k", 0.05}, {"q6_k", 0.025}, {"iq4_xs", 0.10}};
    const auto x = normal_values(65536, 61);
    double rms = 0;
    for (float v : x) rms += static_cast<double>(v) * v;
    rms = std::sqrt(rms / static_cast<double>(x.size()));
    for (const auto &l : limits) {
        const strata_quant_desc &d = *find(q::kernel_set::scalar, l.name);
        const auto r = quantize(d, x);
        double err = 0;
        for (size_t i = 0; i < x.size(); ++i) err += (static_cast<double>(r.values[i]) - x[i]) * (r.values[i] - x[i]);
        const double relative = std::sqrt(err / static_cast<double>(x.size())) / rms;
        EXPECT_LT(relative, l.max_relative_rms) << l.name;
        EXPECT_GT(relative, l.max_relative_rms / 20) << l.name << ": suspiciously exact";
    }
}

} // namespace

namespace {

// A NaN activation reaches the dot product (ggml's quantizer would zero it, hiding damaged weights upstream behind
// plausible logits): every integer-path format, both kernel sets, the single and the multi kernel.
TEST(AddedFormats, ANanActivationMakesTheIntegerDotNan) {
    for (const auto set : kernel_sets()) {
        const strata_quant_desc *table = q::descriptors(set);
        for (int i = 0; i < q::n_descriptors(); ++i) {
            const strata_quant_desc &d = table[i];
            if (!STRATA_HAS_SLOT(&d, dot_act) || d.dot_act == nullptr) continue;
            const int64_t n = 512;
            const auto row = quantize(d, weight_values(n, 71));
            auto x = normal_values(n, 72);
            x[300] = std::numeric_limits<float>::quiet_NaN();
            std::vector<unsigned char> xq(static_cast<size_t>(n / d.block_elems * d.act_block_bytes));
            d.quantize_activations(x.data(), xq.data(), n);
            EXPECT_TRUE(std::isnan(d.dot_act(row.bytes.data(), xq.data(), n)))
                << d.header.name << " " << q::kernel_set_name(set);
            float out = 0;
            d.dot_act_multi(row.bytes.data(), xq.data(), 0, 1, n, &out);
            EXPECT_TRUE(std::isnan(out)) << d.header.name << " " << q::kernel_set_name(set);
        }
    }
}

} // namespace
