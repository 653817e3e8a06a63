// Numerics shared by the device tests (tests/device for the CPU device, tests/device_cuda for the CUDA device):
// seeded random inputs, float64 references, error measures and an attention problem with padded KV rows.
#pragma once

#include <strata/plugin_abi.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace device_test {

inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(n);
    for (auto &x : v) x = dist(rng);
    return v;
}

// max |got - want| / max |want|: the error relative to the output's scale (elementwise relative error is
// meaningless for outputs that cancel to ~0). A NaN anywhere is an infinite error.
inline double normwise_error(const std::vector<float> &got, const std::vector<double> &want) {
    EXPECT_EQ(got.size(), want.size());
    double err = 0.0, scale = 0.0;
    for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
        const double d = std::fabs(static_cast<double>(got[i]) - want[i]);
        err = std::isnan(d) ? INFINITY : std::max(err, d);
        scale = std::max(scale, std::fabs(want[i]));
    }
    return scale > 0.0 ? err / scale : err;
}

inline double normwise_error(const std::vector<float> &got, const std::vector<float> &want) {
    return normwise_error(got, std::vector<double>(want.begin(), want.end()));
}

// Largest elementwise relative difference (with a tiny absolute floor for values that underflow to ~0).
inline double elementwise_error(const std::vector<float> &a, const std::vector<float> &b) {
    EXPECT_EQ(a.size(), b.size());
    double worst = 0.0;
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
        const double d = std::fabs(static_cast<double>(a[i]) - b[i]);
        const double m = std::max(std::fabs(static_cast<double>(a[i])), std::fabs(static_cast<double>(b[i])));
        worst = std::max(worst, d / std::max(m, 1e-30));
    }
    return worst;
}

// y[t][r] = sum_k w[r][k] x[t][k] in float64: the reference for every matmul.
inline std::vector<double> reference_product(const std::vector<float> &w, const std::vector<float> &x, int64_t rows,
                                             int64_t cols, int32_t n_tokens) {
    std::vector<double> y(static_cast<size_t>(rows * n_tokens));
    for (int32_t t = 0; t < n_tokens; ++t)
        for (int64_t r = 0; r < rows; ++r) {
            double sum = 0.0;
            for (int64_t k = 0; k < cols; ++k)
                sum += static_cast<double>(w[static_cast<size_t>(r * cols + k)]) * x[static_cast<size_t>(t * cols + k)];
            y[static_cast<size_t>(t * rows + r)] = sum;
        }
    return y;
}

// Attention problem over a KV cache whose rows are padded (stride > n_kv_heads * head_dim).
struct attention_case {
    int32_t n_tokens, n_heads, n_kv_heads, head_dim, first_pos;
    int32_t stride() const { return n_kv_heads * head_dim + 3; }
    int32_t n_ctx() const { return first_pos + n_tokens; }
};

struct attention_data {
    std::vector<float> q, k, v;
    std::vector<int32_t> positions;
    float scale;
};

inline attention_data make_attention_data(const attention_case &c, uint32_t seed) {
    attention_data d;
    d.q = random_floats(static_cast<size_t>(c.n_tokens) * c.n_heads * c.head_dim, seed, -2.0f, 2.0f);
    d.k = random_floats(static_cast<size_t>(c.n_ctx()) * c.stride(), seed + 1, -2.0f, 2.0f);
    d.v = random_floats(static_cast<size_t>(c.n_ctx()) * c.stride(), seed + 2);
    for (int32_t t = 0; t < c.n_tokens; ++t) d.positions.push_back(c.first_pos + t);
    d.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    return d;
}

// Arguments over q/k/v at the given addresses (host vectors, or their device copies) writing to `out`.
inline strata_attention_args attention_args(const attention_case &c, const attention_data &d, const float *q,
                                            const float *k, const float *v, float *out) {
    strata_attention_args a{};
    a.struct_size = sizeof a;
    a.n_tokens = c.n_tokens;
    a.n_heads = c.n_heads;
    a.n_kv_heads = c.n_kv_heads;
    a.head_dim = c.head_dim;
    a.kv_row_stride = c.stride();
    a.positions = d.positions.data();
    a.q = q;
    a.k_cache = k;
    a.v_cache = v;
    a.scale = d.scale;
    a.out = out;
    return a;
}

inline strata_attention_args attention_args(const attention_case &c, const attention_data &d, float *out) {
    return attention_args(c, d, d.q.data(), d.k.data(), d.v.data(), out);
}

} // namespace device_test
