// gemm_act and gemm_f32 (ABI 1.22): Q8_0 / Q4_0 / Q5_0 / Q4_K (the other K-quants on x86; F32 / F16 / BF16) weight rows times
// quantized activation vectors as a GEMM. What the ABI promises and the device relies on for greedy tokens that do not depend on threads, prompt chunks or decoding one token at
// a time: every output has the bits of the one-output definition (gemm_one_*) in any call shape — any row count and
// offset (the 8-row tiles and the row tail), any vector count (the 4-vector tiles and their tails), padded strides —
// and the scalar, AVX2 and AVX-VNNI kernels agree bit for bit. The definition itself is checked against float64 on
// data where every step is exact, and against the float64 dot of the dequantized operands on real-looking data.
#include "ggml_quants.hpp"
#include "quant_test_data.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <initializer_list>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace q = strata::quants;
using strata::quants::testing::normal_values;

namespace {

struct gemm_case {
    std::string name; // "<kernel set> <format>"
    q::gemm_act_fn gemm;
    float (*one)(const void *, const void *, int64_t);
    uint32_t ggml_type;
};

std::vector<gemm_case> gemm_cases() {
    std::vector<gemm_case> out = {
        {"scalar q8_0", q::gemm_act_q8_0_scalar, q::gemm_one_q8_0, q::ggml_type_q8_0},
        {"scalar q4_0", q::gemm_act_q4_0_scalar, q::gemm_one_q4_0, q::ggml_type_q4_0},
        {"scalar q5_0", q::gemm_act_q5_0_scalar, q::gemm_one_q5_0, q::ggml_type_q5_0}};
    if (q::cpu_has_avx2_fma()) {
        out.push_back({"avx2 q8_0", q::gemm_act_q8_0_avx2, q::gemm_one_q8_0, q::ggml_type_q8_0});
        out.push_back({"avx2 q4_0", q::gemm_act_q4_0_avx2, q::gemm_one_q4_0, q::ggml_type_q4_0});
        out.push_back({"avx2-or-vnni q8_0", q::gemm_act_q8_0_avx2_or_vnni, q::gemm_one_q8_0, q::ggml_type_q8_0});
        out.push_back({"avx2-or-vnni q4_0", q::gemm_act_q4_0_avx2_or_vnni, q::gemm_one_q4_0, q::ggml_type_q4_0});
        out.push_back({"avx2 q5_0", q::gemm_act_q5_0_avx2, q::gemm_one_q5_0, q::ggml_type_q5_0});
        out.push_back({"avx2-or-vnni q5_0", q::gemm_act_q5_0_avx2_or_vnni, q::gemm_one_q5_0, q::ggml_type_q5_0});
    }
    if (q::cpu_has_avx_vnni()) {
        out.push_back({"avxvnni q8_0", q::gemm_act_q8_0_avxvnni, q::gemm_one_q8_0, q::ggml_type_q8_0});
        out.push_back({"avxvnni q4_0", q::gemm_act_q4_0_avxvnni, q::gemm_one_q4_0, q::ggml_type_q4_0});
        out.push_back({"avxvnni q5_0", q::gemm_act_q5_0_avxvnni, q::gemm_one_q5_0, q::ggml_type_q5_0});
    }
    if (q::cpu_has_avx512_vnni()) {
        out.push_back({"avx512 q8_0", q::gemm_act_q8_0_avx512, q::gemm_one_q8_0, q::ggml_type_q8_0});
        out.push_back({"avx512 q4_0", q::gemm_act_q4_0_avx512, q::gemm_one_q4_0, q::ggml_type_q4_0});
        out.push_back({"avx512 q5_0", q::gemm_act_q5_0_avx512, q::gemm_one_q5_0, q::ggml_type_q5_0});
    }
    if (q::cpu_has_avx2_fma()) {
        out.push_back({"x86 q8_0", q::gemm_act_q8_0_x86, q::gemm_one_q8_0, q::ggml_type_q8_0});
        out.push_back({"x86 q4_0", q::gemm_act_q4_0_x86, q::gemm_one_q4_0, q::ggml_type_q4_0});
    }
    return out;
}

uint32_t bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}

int64_t block_bytes(uint32_t type) {
    if (type == q::ggml_type_q8_0) return int64_t{sizeof(q::block_q8_0)};
    return type == q::ggml_type_q5_0 ? int64_t{sizeof(q::block_q5_0)} : int64_t{sizeof(q::block_q4_0)};
}

// n_rows quantized rows of n elements, row_bytes apart (row_bytes >= a row: a view may be padded), with block
// magnitudes spread over decades and, in Q8_0, the extreme quant -128 that a file may hold (the quantizer writes
// [-127, 127], but the kernels must not assume it).
std::vector<unsigned char> weight_rows(uint32_t type, int64_t n_rows, int64_t n, int64_t row_bytes, uint32_t seed) {
    std::vector<unsigned char> rows(static_cast<size_t>(n_rows * row_bytes), 0xcd);
    for (int64_t r = 0; r < n_rows; ++r) {
        std::vector<float> w = normal_values(n, seed + static_cast<uint32_t>(r));
        for (int64_t i = 0; i < n; ++i) w[i] *= 1.0f + static_cast<float>((i / 32 + r) % 5) * 10.0f;
        unsigned char *row = rows.data() + r * row_bytes;
        if (type == q::ggml_type_q8_0) {
            q::quantize_row_q8_0(w.data(), row, n);
            if (r % 3 == 0) reinterpret_cast<q::block_q8_0 *>(row)->qs[r % 32] = -128;
        } else if (type == q::ggml_type_q5_0) {
            q::quantize_row_q5_0(w.data(), row, n);
        } else {
            q::quantize_row_q4_0(w.data(), row, n);
        }
    }
    return rows;
}

// n_x activation vectors of n elements, `stride` bytes apart, through the kernel set's quantizer.
std::vector<unsigned char> activations(int32_t n_x, int64_t n, int64_t stride, uint32_t seed) {
    std::vector<unsigned char> xq(static_cast<size_t>(stride * n_x), 0xab);
    for (int32_t i = 0; i < n_x; ++i) {
        std::vector<float> x = normal_values(n, seed + static_cast<uint32_t>(i * 7));
        for (int64_t j = 0; j < n; ++j) x[j] *= 0.01f + static_cast<float>((j / 32 + i) % 3);
        q::quantize_activations_q8_scalar(x.data(), xq.data() + i * stride, n);
    }
    return xq;
}

// Calls over row ranges [r0, r0 + nr) and vector ranges [t0, t0 + nt) of an n_rows x n_x problem, each into a
// padded output: every output must have want's bits (want[t * n_rows + r]) and nothing else may be written.
// call(r0, nr, t0, nt, out, out_stride) runs the kernel; `what` names the case in messages.
template <class Call>
void expect_bits_in_every_call_shape(const std::vector<uint32_t> &want, int64_t n_rows, int32_t n_x,
                                     std::initializer_list<int64_t> row_offsets, std::initializer_list<int64_t> row_counts,
                                     std::initializer_list<int32_t> vector_offsets,
                                     std::initializer_list<int32_t> vector_counts, const std::string &what,
                                     const Call &call) {
    const int64_t out_stride = n_rows + 5;
    for (int64_t r0 : row_offsets)
        for (int64_t nr : row_counts) {
            if (r0 + nr > n_rows) continue;
            for (int32_t t0 : vector_offsets)
                for (int32_t nt : vector_counts) {
                    if (t0 + nt > n_x) continue;
                    std::vector<float> out(static_cast<size_t>(out_stride * n_x), -12345.0f);
                    call(r0, nr, t0, nt, out.data(), out_stride);
                    for (int32_t t = 0; t < n_x; ++t)
                        for (int64_t r = 0; r < out_stride; ++r) {
                            const float got = out[t * out_stride + r];
                            if (t < nt && r < nr)
                                ASSERT_EQ(bits(got), want[(t0 + t) * n_rows + r0 + r])
                                    << what << ", rows " << r0 << "+" << nr << ", vectors " << t0 << "+" << nt
                                    << ", output (" << r << ", " << t << ")";
                            else
                                ASSERT_EQ(got, -12345.0f) << what << ": wrote outside the call's outputs";
                        }
                }
        }
}

TEST(GemmAct, EveryOutputHasTheOneOutputBitsInAnyCallShape) {
    for (const gemm_case &k : gemm_cases()) {
        for (int64_t n_blocks : {1, 2, 5, 24}) {
            const int64_t n = n_blocks * 32;
            const int64_t row_bytes = n_blocks * block_bytes(k.ggml_type) + 6;
            const int64_t stride = n_blocks * static_cast<int64_t>(sizeof(q::block_q8_act)) + 48;
            constexpr int64_t n_rows = 37; // whole 16- and 8-row tiles and their tails
            constexpr int32_t n_x = 29;    // up to 27 vectors: 12-vector passes (AVX-512) with an 8, a 4 or a tail
            const auto rows = weight_rows(k.ggml_type, n_rows, n, row_bytes, static_cast<uint32_t>(n_blocks));
            const auto xq = activations(n_x, n, stride, 100u + static_cast<uint32_t>(n_blocks));
            std::vector<uint32_t> want(static_cast<size_t>(n_rows * n_x));
            for (int32_t t = 0; t < n_x; ++t)
                for (int64_t r = 0; r < n_rows; ++r)
                    want[t * n_rows + r] = bits(k.one(rows.data() + r * row_bytes, xq.data() + t * stride, n));
            expect_bits_in_every_call_shape(
                want, n_rows, n_x, {0, 1, 8, 13}, {1, 3, 8, 9, 14, 16, 17, 24, 33}, {0, 2},
                {1, 2, 3, 4, 5, 8, 9, 10, 11, 12, 13, 16, 19, 20, 23, 24, 27},
                k.name + ": " + std::to_string(n_blocks) + " blocks",
                [&](int64_t r0, int64_t nr, int32_t t0, int32_t nt, float *out, int64_t out_stride) {
                    k.gemm(rows.data() + r0 * row_bytes, row_bytes, nr, xq.data() + t0 * stride, stride, nt, n, out,
                           out_stride);
                });
        }
    }
}

// The K-quants' gemm_act in every kernel set that has one: every output has the bits of its definition in any call
// shape — one vector (the decode loop), many (16 at a time, passes of 8, 4 and the rest), row and vector offsets,
// padded strides. The definition is gemm_one_q4_k for Q4_K (its 8-row tile, gemm_act_q4_k_tile.hpp, in every x86 set;
// the scalar set has it too) and the scalar dot_act for the others (k_gemm_act, x86 only).
TEST(GemmAct, KQuantsEveryOutputHasItsDefinitionsBitsInAnyCallShape) {
    std::vector<std::pair<std::string, q::format_kernels (*)(uint32_t)>> sets = {{"scalar", q::added_format_kernels_scalar}};
    if (q::cpu_has_avx2_fma()) sets.emplace_back("avx2", q::added_format_kernels_avx2);
    if (q::cpu_has_avx512_vnni()) sets.emplace_back("avx512", q::added_format_kernels_avx512);
    const strata_quant_desc *scalar = q::descriptors(q::kernel_set::scalar);
    int checked_q4_k = 0;
    for (const auto &[set_name, kernels] : sets) {
        for (int i = 0; i < q::n_descriptors(); ++i) {
            const strata_quant_desc &d = scalar[i];
            if (d.block_elems != q::qk_k) continue;
            const bool q4_k = d.ggml_type == q::ggml_type_q4_k;
            const q::gemm_act_fn gemm = kernels(d.ggml_type).gemm_act;
            if (set_name == "scalar" && !q4_k) {
                EXPECT_EQ(gemm, nullptr) << d.header.name << ": the scalar set's K-quants take dot_act_multi";
                continue;
            }
            ASSERT_NE(gemm, nullptr) << set_name << " " << d.header.name;
            if (q4_k) ++checked_q4_k;
            for (int64_t n_blocks : {1, 3}) {
                const int64_t n = n_blocks * q::qk_k;
                const int64_t row_bytes = n_blocks * d.block_bytes + 6;
                const int64_t stride = n_blocks * static_cast<int64_t>(sizeof(q::block_q8_k)) + 40;
                constexpr int64_t n_rows = 19;
                constexpr int32_t n_x = 37;
                std::vector<unsigned char> rows(static_cast<size_t>(n_rows * row_bytes), 0xcd);
                for (int64_t r = 0; r < n_rows; ++r) {
                    std::vector<float> w = normal_values(n, 900 + static_cast<uint32_t>(r));
                    for (int64_t j = 0; j < n; ++j) w[j] *= 1.0f + static_cast<float>((j / 16 + r) % 5) * 10.0f;
                    d.quantize_row(w.data(), rows.data() + r * row_bytes, n);
                }
                std::vector<unsigned char> xq(static_cast<size_t>(stride * n_x), 0xab);
                for (int32_t t = 0; t < n_x; ++t) {
                    const std::vector<float> x = normal_values(n, 950 + static_cast<uint32_t>(t), 0.1f + t % 4);
                    d.quantize_activations(x.data(), xq.data() + t * stride, n);
                }
                std::vector<uint32_t> want(static_cast<size_t>(n_rows * n_x));
                for (int32_t t = 0; t < n_x; ++t)
                    for (int64_t r = 0; r < n_rows; ++r) {
                        const unsigned char *row = rows.data() + r * row_bytes, *x = xq.data() + t * stride;
                        want[t * n_rows + r] = bits(q4_k ? q::gemm_one_q4_k(row, x, n) : d.dot_act(row, x, n));
                    }
                expect_bits_in_every_call_shape(
                    want, n_rows, n_x, {0, 3}, {1, 4, 8, 16, 17, 19}, {0, 1}, {1, 2, 3, 8, 9, 16, 17, 33, 36},
                    set_name + " " + d.header.name + ": " + std::to_string(n_blocks) + " blocks",
                    [&](int64_t r0, int64_t nr, int32_t t0, int32_t nt, float *out, int64_t out_stride) {
                        gemm(rows.data() + r0 * row_bytes, row_bytes, nr, xq.data() + t0 * stride, stride, nt, n, out,
                             out_stride);
                    });
            }
        }
    }
    EXPECT_EQ(checked_q4_k, static_cast<int>(sets.size()));
}

// ggml's get_scale_min_k4: chunk c's 6-bit scale and min from Q4_K's 12 packed bytes.
void scale_min_k4(int c, const uint8_t *q, int &sc, int &m) {
    if (c < 4) {
        sc = q[c] & 63;
        m = q[c + 4] & 63;
    } else {
        sc = (q[c + 4] & 0xF) | ((q[c - 4] >> 6) << 4);
        m = (q[c + 4] >> 4) | ((q[c] >> 6) << 4);
    }
}

// gemm_one_q4_k against the float64 dot of the dequantized operands (ggml's dequantize_row_q4_k and the Q8_K
// activations' d * q), within its roundings: the scale products, float(isum), float(msum) and two FMAs per
// super-block, on terms bounded by the sum of |d sc u a| and |dmin m a|. Checked through the scalar set's gemm_act and,
// on x86, the AVX2 tile (equal to it bit for bit above).
TEST(GemmAct, Q4KCloseToTheFloat64DotOfTheDequantizedOperands) {
    std::vector<q::gemm_act_fn> gemms = {q::gemm_act_q4_k_scalar};
    if (q::cpu_has_avx2_fma()) gemms.push_back(q::gemm_act_q4_k_avx2);
    const int64_t n_blocks = 8, n = n_blocks * q::qk_k, n_rows = 11;
    const int32_t n_x = 5;
    const int64_t row_bytes = n_blocks * static_cast<int64_t>(sizeof(q::block_q4_k));
    const int64_t stride = n_blocks * static_cast<int64_t>(sizeof(q::block_q8_k));
    std::vector<unsigned char> rows(static_cast<size_t>(n_rows * row_bytes));
    for (int64_t r = 0; r < n_rows; ++r) {
        std::vector<float> w = normal_values(n, 40 + static_cast<uint32_t>(r));
        for (int64_t j = 0; j < n; ++j) w[j] = w[j] * (1.0f + static_cast<float>((j / 32 + r) % 7)) + 0.3f;
        q::quantize_row_q4_k(w.data(), rows.data() + r * row_bytes, n);
    }
    const strata_quant_desc &desc = q::descriptors(q::kernel_set::scalar)[11];
    ASSERT_EQ(desc.ggml_type, q::ggml_type_q4_k);
    std::vector<unsigned char> xq(static_cast<size_t>(stride * n_x));
    for (int32_t t = 0; t < n_x; ++t) {
        const std::vector<float> x = normal_values(n, 70 + static_cast<uint32_t>(t), 0.5f + t);
        desc.quantize_activations(x.data(), xq.data() + t * stride, n);
    }
    for (const q::gemm_act_fn gemm : gemms) {
        std::vector<float> out(static_cast<size_t>(n_rows * n_x));
        gemm(rows.data(), row_bytes, n_rows, xq.data(), stride, n_x, n, out.data(), n_rows);
        for (int32_t t = 0; t < n_x; ++t) {
            const auto *a = reinterpret_cast<const q::block_q8_k *>(xq.data() + t * stride);
            for (int64_t r = 0; r < n_rows; ++r) {
                const auto *w = reinterpret_cast<const q::block_q4_k *>(rows.data() + r * row_bytes);
                double want = 0.0, magnitude = 0.0;
                for (int64_t b = 0; b < n_blocks; ++b) {
                    const double d = q::fp16_to_fp32(w[b].d), dmin = q::fp16_to_fp32(w[b].dmin);
                    for (int c = 0; c < 8; ++c) {
                        int sc = 0, m = 0;
                        scale_min_k4(c, w[b].scales, sc, m);
                        for (int l = 0; l < 32; ++l) {
                            const int u = (w[b].qs[32 * (c / 2) + l] >> (4 * (c % 2))) & 0xF;
                            const double x = static_cast<double>(a[b].d) * a[b].qs[32 * c + l];
                            want += (d * sc * u - dmin * m) * x;
                            magnitude += (std::fabs(d * sc * u) + std::fabs(dmin * m)) * std::fabs(x);
                        }
                    }
                }
                EXPECT_NEAR(out[t * n_rows + r], want, 6.0 * n_blocks * 6e-8 * magnitude + 1e-30)
                    << "row " << r << " vector " << t;
            }
        }
    }
}

// Q4_K's tile on bytes no quantizer writes: every scale byte random (the high bits of the packed 6-bit fields too),
// nibbles at 15 throughout some blocks, activations at -128 / 127 throughout some blocks and per-16 sums that do not
// match the quants (the definition takes them as they are), random finite scales: every output keeps
// gemm_one_q4_k's bits; a NaN activation scale reaches exactly its vector's outputs.
TEST(GemmAct, Q4KTileHasItsDefinitionsBitsOnAnyBytes) {
    if (!q::cpu_has_avx2_fma()) GTEST_SKIP() << "this CPU has no AVX2+FMA; only the scalar Q4_K GEMM runs here";
    std::mt19937 rng(29);
    const auto finite_half = [&] {
        uint16_t h;
        do h = static_cast<uint16_t>(rng()); while ((h & 0x7c00) == 0x7c00 || (h & 0x7c00) < 0x2000);
        return h;
    };
    const int64_t n_blocks = 3, n = n_blocks * q::qk_k, n_rows = 21;
    const int32_t n_x = 11; // an 8-vector pass (the AVX-512 tile's) and a 3-vector one
    const int64_t row_bytes = n_blocks * static_cast<int64_t>(sizeof(q::block_q4_k)) + 6; // padded, blocks kept aligned
    const int64_t stride = n_blocks * static_cast<int64_t>(sizeof(q::block_q8_k)) + 4;
    std::vector<unsigned char> rows(static_cast<size_t>(n_rows * row_bytes));
    for (int64_t r = 0; r < n_rows; ++r)
        for (int64_t b = 0; b < n_blocks; ++b) {
            q::block_q4_k w;
            w.d = finite_half();
            w.dmin = finite_half();
            for (uint8_t &v : w.scales) v = static_cast<uint8_t>(rng());
            const bool full = (r + b) % 4 == 0;
            for (uint8_t &v : w.qs) v = full ? 0xff : static_cast<uint8_t>(rng());
            std::memcpy(rows.data() + r * row_bytes + b * static_cast<int64_t>(sizeof w), &w, sizeof w);
        }
    std::vector<unsigned char> xq(static_cast<size_t>(stride * n_x));
    for (int32_t t = 0; t < n_x; ++t)
        for (int64_t b = 0; b < n_blocks; ++b) {
            q::block_q8_k a;
            a.d = std::ldexp(static_cast<float>(rng() % 1000 + 1), -static_cast<int>(rng() % 20));
            const int kind = static_cast<int>((t + b) % 3);
            for (int8_t &v : a.qs) v = kind == 0 ? int8_t{-128} : kind == 1 ? int8_t{127} : static_cast<int8_t>(rng());
            for (int16_t &v : a.bsums) v = static_cast<int16_t>(rng());
            std::memcpy(xq.data() + t * stride + b * static_cast<int64_t>(sizeof a), &a, sizeof a);
        }
    for (bool nan_scale : {false, true}) {
        if (nan_scale) {
            float nan = std::nanf("");
            std::memcpy(xq.data() + 4 * stride + sizeof(q::block_q8_k) + offsetof(q::block_q8_k, d), &nan, sizeof nan);
        }
        std::vector<uint32_t> want(static_cast<size_t>(n_rows * n_x));
        for (int32_t t = 0; t < n_x; ++t)
            for (int64_t r = 0; r < n_rows; ++r)
                want[t * n_rows + r] = bits(q::gemm_one_q4_k(rows.data() + r * row_bytes, xq.data() + t * stride, n));
        // The AVX2 tile and, where the CPU has AVX-512, the 16-row tile (21 rows: a whole tile and its AVX2 rest).
        std::vector<std::pair<const char *, q::gemm_act_fn>> kernels = {{"avx2", q::gemm_act_q4_k_avx2}};
        if (q::cpu_has_avx512_vnni()) kernels.emplace_back("avx512", q::gemm_act_q4_k_avx512);
        for (const auto &[name, gemm] : kernels) {
            std::vector<float> out(static_cast<size_t>(n_rows * n_x));
            gemm(rows.data(), row_bytes, n_rows, xq.data(), stride, n_x, n, out.data(), n_rows);
            for (int32_t t = 0; t < n_x; ++t)
                for (int64_t r = 0; r < n_rows; ++r) {
                    const float got = out[t * n_rows + r];
                    if (nan_scale) {
                        EXPECT_EQ(std::isnan(got), t == 4) << name << " row " << r << " vector " << t;
                        if (t == 4) continue;
                    }
                    EXPECT_EQ(bits(got), want[t * n_rows + r])
                        << name << " nan " << nan_scale << " row " << r << " vector " << t;
                }
        }
    }
}

// Power-of-two scales and small activation quants: every product, block sum and accumulation is exact in float, so
// each kernel must give the float64 result exactly (this pins the definition to the true dot product).
TEST(GemmAct, ExactWhereEveryStepIsExact) {
    std::mt19937 rng(11);
    const float scales[] = {1.0f, 0.5f, 0.25f, 0.125f};
    const uint16_t half_scales[] = {0x3c00, 0x3800, 0x3400, 0x3000};
    for (int trial = 0; trial < 24; ++trial) {
        const int64_t n_blocks = 1 + trial % 4;
        const int64_t n = n_blocks * 32;
        const int64_t n_rows = 8 + trial % 5 + (trial % 2) * 12; // odd trials: a 16-row AVX-512 tile and its rest
        const int32_t n_x = 1 + trial % 6;
        std::vector<q::block_q8_0> w8(static_cast<size_t>(n_rows * n_blocks));
        std::vector<q::block_q4_0> w4(static_cast<size_t>(n_rows * n_blocks));
        std::vector<q::block_q5_0> w5(static_cast<size_t>(n_rows * n_blocks));
        std::vector<int> sw(w8.size());
        for (size_t i = 0; i < w8.size(); ++i) {
            sw[i] = static_cast<int>(rng() % 4);
            w8[i].d = w4[i].d = w5[i].d = half_scales[sw[i]];
            for (int j = 0; j < 32; ++j) w8[i].qs[j] = static_cast<int8_t>(static_cast<int>(rng() % 256) - 128);
            for (int j = 0; j < 16; ++j) w4[i].qs[j] = w5[i].qs[j] = static_cast<uint8_t>(rng() & 0xff);
            for (int j = 0; j < 4; ++j) w5[i].qh[j] = static_cast<uint8_t>(rng() & 0xff);
        }
        // Element j of a Q4_0 / Q5_0 block (the nibble, with Q5_0's fifth bit j of qh, less the offset).
        auto q4_value = [](const q::block_q4_0 &b, int j) {
            return (j < 16 ? b.qs[j] & 0x0f : b.qs[j - 16] >> 4) - 8;
        };
        auto q5_value = [](const q::block_q5_0 &b, int j) {
            const int nibble = j < 16 ? b.qs[j] & 0x0f : b.qs[j - 16] >> 4;
            return (nibble | ((b.qh[j / 8] >> (j % 8)) & 1) << 4) - 16;
        };
        std::vector<q::block_q8_act> a(static_cast<size_t>(n_x * n_blocks));
        std::vector<int> sa(a.size());
        for (size_t i = 0; i < a.size(); ++i) {
            sa[i] = static_cast<int>(rng() % 4);
            a[i].d = scales[sa[i]];
            int32_t sum = 0;
            for (int j = 0; j < 32; ++j) {
                a[i].qs[j] = static_cast<int8_t>(static_cast<int>(rng() % 15) - 7);
                sum += a[i].qs[j];
            }
            a[i].sum_x8 = 8 * sum;
        }
        const int64_t stride = n_blocks * static_cast<int64_t>(sizeof(q::block_q8_act));
        for (const gemm_case &k : gemm_cases()) {
            const int64_t row_bytes = n_blocks * block_bytes(k.ggml_type);
            const void *w = k.ggml_type == q::ggml_type_q8_0   ? static_cast<const void *>(w8.data())
                            : k.ggml_type == q::ggml_type_q5_0 ? static_cast<const void *>(w5.data())
                                                               : static_cast<const void *>(w4.data());
            std::vector<float> out(static_cast<size_t>(n_rows * n_x));
            k.gemm(w, row_bytes, n_rows, a.data(), stride, n_x, n, out.data(), n_rows);
            for (int32_t t = 0; t < n_x; ++t)
                for (int64_t r = 0; r < n_rows; ++r) {
                    double want = 0.0;
                    for (int64_t b = 0; b < n_blocks; ++b) {
                        const size_t wi = static_cast<size_t>(r * n_blocks + b), ai = static_cast<size_t>(t * n_blocks + b);
                        int64_t dot = 0;
                        for (int j = 0; j < 32; ++j) {
                            const int value = k.ggml_type == q::ggml_type_q8_0   ? w8[wi].qs[j]
                                              : k.ggml_type == q::ggml_type_q5_0 ? q5_value(w5[wi], j)
                                                                                 : q4_value(w4[wi], j);
                            dot += int64_t{value} * a[ai].qs[j];
                        }
                        want += static_cast<double>(dot) * scales[sw[wi]] * scales[sa[ai]];
                    }
                    ASSERT_EQ(static_cast<double>(static_cast<float>(want)), want) << "test data must be exact";
                    EXPECT_EQ(out[t * n_rows + r], static_cast<float>(want))
                        << k.name << " trial " << trial << " row " << r << " vector " << t;
                }
        }
    }
}

// Real-looking data: within float rounding of the float64 dot of the dequantized row and activations.
TEST(GemmAct, CloseToTheFloat64DotOfTheDequantizedOperands) {
    for (const gemm_case &k : gemm_cases()) {
        const int64_t n_blocks = 64, n = n_blocks * 32, n_rows = 16;
        const int32_t n_x = 5;
        const int64_t row_bytes = n_blocks * block_bytes(k.ggml_type);
        const int64_t stride = n_blocks * static_cast<int64_t>(sizeof(q::block_q8_act));
        const auto rows = weight_rows(k.ggml_type, n_rows, n, row_bytes, 3u);
        const auto xq = activations(n_x, n, stride, 9u);
        std::vector<float> out(static_cast<size_t>(n_rows * n_x));
        k.gemm(rows.data(), row_bytes, n_rows, xq.data(), stride, n_x, n, out.data(), n_rows);
        std::vector<float> wd(static_cast<size_t>(n)), xd(static_cast<size_t>(n));
        for (int32_t t = 0; t < n_x; ++t) {
            const auto *a = reinterpret_cast<const q::block_q8_act *>(xq.data() + t * stride);
            for (int64_t j = 0; j < n; ++j) xd[j] = a[j / 32].d * a[j / 32].qs[j % 32];
            for (int64_t r = 0; r < n_rows; ++r) {
                if (k.ggml_type == q::ggml_type_q8_0)
                    q::dequantize_row_q8_0(rows.data() + r * row_bytes, wd.data(), n);
                else if (k.ggml_type == q::ggml_type_q5_0)
                    q::dequantize_row_q5_0(rows.data() + r * row_bytes, wd.data(), n);
                else
                    q::dequantize_row_q4_0(rows.data() + r * row_bytes, wd.data(), n);
                double want = 0.0, magnitude = 0.0;
                for (int64_t j = 0; j < n; ++j) {
                    want += static_cast<double>(wd[j]) * xd[j];
                    magnitude += std::fabs(static_cast<double>(wd[j]) * xd[j]);
                }
                // Two roundings per block (scale product, FMA) on terms bounded by `magnitude`.
                EXPECT_NEAR(out[t * n_rows + r], want, 4.0 * n_blocks * 6e-8 * magnitude + 1e-30)
                    << k.name << " row " << r << " vector " << t;
            }
        }
    }
}

// A NaN activation block (the quantizers give it a NaN scale) reaches every output of that vector, and only those.
TEST(GemmAct, ANanActivationBlockReachesItsVectorsOutputs) {
    for (const gemm_case &k : gemm_cases()) {
        const int64_t n_blocks = 3, n = 96, n_rows = 9;
        const int32_t n_x = 3;
        const int64_t row_bytes = n_blocks * block_bytes(k.ggml_type);
        const int64_t stride = n_blocks * static_cast<int64_t>(sizeof(q::block_q8_act));
        const auto rows = weight_rows(k.ggml_type, n_rows, n, row_bytes, 5u);
        auto xq = activations(n_x, n, stride, 7u);
        reinterpret_cast<q::block_q8_act *>(xq.data() + 1 * stride)[2].d = std::nanf("");
        std::vector<float> out(static_cast<size_t>(n_rows * n_x));
        k.gemm(rows.data(), row_bytes, n_rows, xq.data(), stride, n_x, n, out.data(), n_rows);
        for (int32_t t = 0; t < n_x; ++t)
            for (int64_t r = 0; r < n_rows; ++r)
                EXPECT_EQ(std::isnan(out[t * n_rows + r]), t == 1) << k.name << " row " << r << " vector " << t;
    }
}

// ---- gemm_f32: the float formats ----

struct float_gemm_case {
    std::string name;
    q::gemm_f32_fn gemm;
    float (*one)(const void *, const float *, int64_t);
    int bytes; // per element
    void (*quantize)(const float *, void *, int64_t);
    void (*dequantize)(const void *, float *, int64_t);
};

std::vector<float_gemm_case> float_gemm_cases() {
    std::vector<float_gemm_case> out = {
        {"scalar f32", q::gemm_f32_f32_scalar, q::gemm_one_f32, 4, q::quantize_row_f32, q::dequantize_row_f32},
        {"scalar f16", q::gemm_f32_f16_scalar, q::gemm_one_f16, 2, q::quantize_row_f16, q::dequantize_row_f16},
        {"scalar bf16", q::gemm_f32_bf16_scalar, q::gemm_one_bf16, 2, q::quantize_row_bf16, q::dequantize_row_bf16}};
    if (q::cpu_has_avx2_fma()) {
        out.push_back({"avx2 f32", q::gemm_f32_f32_avx2, q::gemm_one_f32, 4, q::quantize_row_f32, q::dequantize_row_f32});
        out.push_back({"avx2 f16", q::gemm_f32_f16_avx2, q::gemm_one_f16, 2, q::quantize_row_f16, q::dequantize_row_f16});
        out.push_back(
            {"avx2 bf16", q::gemm_f32_bf16_avx2, q::gemm_one_bf16, 2, q::quantize_row_bf16, q::dequantize_row_bf16});
        out.push_back({"x86 f32", q::gemm_f32_f32_x86, q::gemm_one_f32, 4, q::quantize_row_f32, q::dequantize_row_f32});
        out.push_back({"x86 f16", q::gemm_f32_f16_x86, q::gemm_one_f16, 2, q::quantize_row_f16, q::dequantize_row_f16});
        out.push_back(
            {"x86 bf16", q::gemm_f32_bf16_x86, q::gemm_one_bf16, 2, q::quantize_row_bf16, q::dequantize_row_bf16});
    }
    if (q::cpu_has_avx512_vnni()) {
        out.push_back(
            {"avx512 f32", q::gemm_f32_f32_avx512, q::gemm_one_f32, 4, q::quantize_row_f32, q::dequantize_row_f32});
        out.push_back(
            {"avx512 f16", q::gemm_f32_f16_avx512, q::gemm_one_f16, 2, q::quantize_row_f16, q::dequantize_row_f16});
        out.push_back({"avx512 bf16", q::gemm_f32_bf16_avx512, q::gemm_one_bf16, 2, q::quantize_row_bf16,
                       q::dequantize_row_bf16});
        out.push_back({"avx512 tall f16", q::gemm_f32_f16_avx512_tall, q::gemm_one_f16, 2, q::quantize_row_f16,
                       q::dequantize_row_f16});
        out.push_back({"avx512 tall bf16", q::gemm_f32_bf16_avx512_tall, q::gemm_one_bf16, 2, q::quantize_row_bf16,
                       q::dequantize_row_bf16});
    }
    return out;
}

// Every output has gemm_one's bits in calls over any rows (4- and 12-row tiles and the tail) and vectors (the AVX2 tiles'
// passes of 3, the two 2s that replace a 3 and a 1, the rest; the AVX-512 tiles' passes of 8, 4 and the rest), at offsets, with n % 8 tails and padded strides;
// and is within float rounding of the float64 dot. (The AVX-512 cases run only on CPUs with AVX-512 F/BW/VL/VNNI.)
TEST(GemmF32, EveryOutputHasTheOneOutputBitsInAnyCallShape) {
    for (const float_gemm_case &k : float_gemm_cases()) {
        for (int64_t n : {8, 13, 64, 771}) {
            const int64_t row_bytes = n * k.bytes + 6, x_stride = n + 3;
            constexpr int64_t n_rows = 21;
            constexpr int32_t n_x = 9;
            std::vector<unsigned char> rows(static_cast<size_t>(n_rows * row_bytes), 0xcd);
            for (int64_t r = 0; r < n_rows; ++r) {
                std::vector<float> w = normal_values(n, 40u + static_cast<uint32_t>(r));
                k.quantize(w.data(), rows.data() + r * row_bytes, n);
            }
            std::vector<float> x(static_cast<size_t>(n_x * x_stride), 7.0f);
            for (int32_t t = 0; t < n_x; ++t) {
                std::vector<float> v = normal_values(n, 90u + static_cast<uint32_t>(t));
                std::copy(v.begin(), v.end(), x.begin() + t * x_stride);
            }
            std::vector<uint32_t> want(static_cast<size_t>(n_rows * n_x));
            std::vector<float> wd(static_cast<size_t>(n));
            for (int64_t r = 0; r < n_rows; ++r) {
                k.dequantize(rows.data() + r * row_bytes, wd.data(), n);
                for (int32_t t = 0; t < n_x; ++t) {
                    const float got = k.one(rows.data() + r * row_bytes, x.data() + t * x_stride, n);
                    want[t * n_rows + r] = bits(got);
                    double exact = 0.0, magnitude = 0.0;
                    for (int64_t j = 0; j < n; ++j) {
                        exact += static_cast<double>(wd[j]) * x[t * x_stride + j];
                        magnitude += std::fabs(static_cast<double>(wd[j]) * x[t * x_stride + j]);
                    }
                    EXPECT_NEAR(got, exact, 1.2e-7 * static_cast<double>(n / 8 + 8) * magnitude + 1e-30)
                        << k.name << " n " << n;
                }
            }
            expect_bits_in_every_call_shape(
                want, n_rows, n_x, {0, 1, 4}, {1, 3, 4, 5, 7, 8, 9, 12, 16, 17}, {0, 1}, {1, 2, 3, 4, 5, 7, 8},
                k.name + ": n " + std::to_string(n),
                [&](int64_t r0, int64_t nr, int32_t t0, int32_t nt, float *out, int64_t out_stride) {
                    k.gemm(rows.data() + r0 * row_bytes, row_bytes, nr, x.data() + t0 * x_stride, x_stride, nt, n, out,
                           out_stride);
                });
        }
    }
}

TEST(GemmAct, DescriptorsOfferItWithItsTile) {
    for (auto set : {q::kernel_set::scalar, q::kernel_set::avx2_fma}) {
        const strata_quant_desc *table = q::descriptors(set);
        for (int i = 0; i < q::n_descriptors(); ++i) {
            const bool legacy = table[i].ggml_type == q::ggml_type_q8_0 || table[i].ggml_type == q::ggml_type_q4_0 ||
                                table[i].ggml_type == q::ggml_type_q5_0;
            // The K-quants have it in the x86 kernel sets (AVX2, and AVX-512 where the CPU has it), Q4_K everywhere.
            const bool k_quant = table[i].block_elems == q::qk_k &&
                                 (set == q::kernel_set::avx2_fma || table[i].ggml_type == q::ggml_type_q4_k);
            EXPECT_EQ(STRATA_HAS_SLOT(&table[i], gemm_act), legacy || k_quant) << table[i].header.name;
            const bool floating = table[i].ggml_type == q::ggml_type_f32 || table[i].ggml_type == q::ggml_type_f16 ||
                                  table[i].ggml_type == q::ggml_type_bf16;
            EXPECT_EQ(STRATA_HAS_SLOT(&table[i], gemm_f32), floating) << table[i].header.name;
            // F16 and BF16 on an AMD CPU with AVX-512 take the tall tile, and say so (the device keeps tiles whole).
            const bool tall = set == q::kernel_set::avx2_fma && q::avx512_tall_float_tiles() &&
                              (table[i].ggml_type == q::ggml_type_f16 || table[i].ggml_type == q::ggml_type_bf16);
            // Q8_0, Q4_0, Q5_0 and Q4_K take 16-row tiles on a CPU with AVX-512 VNNI, and say so too.
            const bool sixteen = set == q::kernel_set::avx2_fma && q::cpu_has_avx512_vnni() &&
                                 (table[i].ggml_type == q::ggml_type_q8_0 || table[i].ggml_type == q::ggml_type_q4_0 ||
                                  table[i].ggml_type == q::ggml_type_q5_0 || table[i].ggml_type == q::ggml_type_q4_k);
            EXPECT_EQ(table[i].gemm_row_tile, sixteen            ? q::avx512_gemm_row_tile
                                              : legacy || k_quant ? q::gemm_row_tile
                                              : tall             ? q::tall_float_gemm_row_tile
                                              : floating         ? q::float_gemm_row_tile
                                                                 : 0u)
                << table[i].header.name;
            if (legacy) {
                EXPECT_TRUE(STRATA_HAS_SLOT(&table[i], dot_act)) << table[i].header.name;
            }
        }
    }
    EXPECT_EQ(q::descriptors(q::kernel_set::scalar)[3].gemm_act, &q::gemm_act_q8_0_scalar);
    EXPECT_EQ(q::descriptors(q::kernel_set::scalar)[4].gemm_act, &q::gemm_act_q4_0_scalar);
    EXPECT_EQ(q::descriptors(q::kernel_set::avx2_fma)[3].gemm_act, &q::gemm_act_q8_0_x86);
    EXPECT_EQ(q::descriptors(q::kernel_set::avx2_fma)[4].gemm_act, &q::gemm_act_q4_0_x86);
    EXPECT_EQ(q::descriptors(q::kernel_set::scalar)[6].gemm_act, &q::gemm_act_q5_0_scalar);
    EXPECT_EQ(q::descriptors(q::kernel_set::avx2_fma)[6].gemm_act,
              q::cpu_has_avx512_vnni() ? &q::gemm_act_q5_0_avx512 : &q::gemm_act_q5_0_avx2_or_vnni);
    EXPECT_EQ(q::descriptors(q::kernel_set::scalar)[11].gemm_act, &q::gemm_act_q4_k_scalar);
    // Q4_K: the 16-row AVX-512 tile where the CPU has AVX-512 F/BW/VL/VNNI, else the 8-row AVX2 one.
    EXPECT_EQ(q::descriptors(q::kernel_set::avx2_fma)[11].gemm_act,
              q::cpu_has_avx512_vnni() ? &q::gemm_act_q4_k_avx512 : &q::gemm_act_q4_k_avx2);
    EXPECT_EQ(q::descriptors(q::kernel_set::scalar)[1].gemm_f32, &q::gemm_f32_f16_scalar);
    EXPECT_EQ(q::descriptors(q::kernel_set::avx2_fma)[0].gemm_f32, &q::gemm_f32_f32_x86);
    EXPECT_EQ(q::descriptors(q::kernel_set::avx2_fma)[1].gemm_f32, &q::gemm_f32_f16_x86);
    EXPECT_EQ(q::descriptors(q::kernel_set::avx2_fma)[2].gemm_f32, &q::gemm_f32_bf16_x86);
}

// A descriptor compiled against ABI 1.21 (struct_size ends after find_nonfinite) reads as "no GEMM kernel".
TEST(GemmAct, AbiOnePointTwentyOneDescriptorHidesTheSlot) {
    strata_quant_desc d = q::descriptors(q::kernel_set::scalar)[3];
    d.header.struct_size = static_cast<uint32_t>(offsetof(strata_quant_desc, find_nonfinite) + sizeof(d.find_nonfinite));
    EXPECT_TRUE(STRATA_HAS_SLOT(&d, dot_act));
    EXPECT_FALSE(STRATA_HAS_SLOT(&d, gemm_act));
}

} // namespace
