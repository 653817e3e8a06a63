// Every op of the CPU device against a naive float64 reference, on 1, 2 and 7 threads.
#include "cpu_test_support.hpp"

#include <strata/device_args.hpp>

namespace {

using namespace cpu_test;

constexpr double f32_tolerance = 1e-5;

class CpuOps : public ::testing::TestWithParam<int> {
  protected:
    void SetUp() override {
        dev_ = make_device(GetParam());
        ASSERT_NE(dev_, nullptr);
        ASSERT_EQ(ops().thread_count(dev_.get()), GetParam());
    }
    strata_device *dev() { return dev_.get(); }
    strata_status st_{};

  private:
    device_ptr dev_;
};

// ---- references ----

std::vector<double> ref_matmul(const std::vector<float> &w, int64_t rows, int64_t cols, const std::vector<float> &x,
                               int n_tokens) {
    std::vector<double> y(static_cast<size_t>(rows) * n_tokens);
    for (int t = 0; t < n_tokens; ++t)
        for (int64_t r = 0; r < rows; ++r) {
            double s = 0.0;
            for (int64_t c = 0; c < cols; ++c) s += double{w[r * cols + c]} * x[t * cols + c];
            y[t * rows + r] = s;
        }
    return y;
}

std::vector<double> ref_rms_norm(const std::vector<float> &x, const std::vector<float> &w, int n_tokens, int dim,
                                 double eps) {
    std::vector<double> out(x.size());
    for (int t = 0; t < n_tokens; ++t) {
        double ss = 0.0;
        for (int i = 0; i < dim; ++i) ss += double{x[t * dim + i]} * x[t * dim + i];
        const double inv = 1.0 / std::sqrt(ss / dim + eps);
        for (int i = 0; i < dim; ++i) out[t * dim + i] = x[t * dim + i] * inv * w[i];
    }
    return out;
}

std::vector<double> ref_rope(const std::vector<float> &x, int n_tokens, int n_heads, int head_dim, int rot_dims,
                             const std::vector<int32_t> &pos, double base, int mode) {
    std::vector<double> out(x.begin(), x.end());
    for (int t = 0; t < n_tokens; ++t)
        for (int h = 0; h < n_heads; ++h)
            for (int i = 0; i < rot_dims / 2; ++i) {
                const double theta = pos[t] * std::pow(base, -2.0 * i / rot_dims);
                const size_t base_idx = (static_cast<size_t>(t) * n_heads + h) * head_dim;
                const size_t i0 = base_idx + (mode == STRATA_ROPE_NEOX ? i : 2 * i);
                const size_t i1 = i0 + (mode == STRATA_ROPE_NEOX ? rot_dims / 2 : 1);
                const double x0 = x[i0], x1 = x[i1];
                out[i0] = x0 * std::cos(theta) - x1 * std::sin(theta);
                out[i1] = x0 * std::sin(theta) + x1 * std::cos(theta);
            }
    return out;
}

std::vector<double> ref_attention(const attention_case &c, const attention_data &d, double softcap = 0.0,
                                  int window = 0) {
    std::vector<double> out(d.q.size(), 0.0);
    const int group = c.n_heads / c.n_kv_heads;
    for (int t = 0; t < c.n_tokens; ++t)
        for (int h = 0; h < c.n_heads; ++h) {
            const int kvh = h / group;
            const int n_kv = d.positions[t] + 1;
            const float *q = d.q.data() + (static_cast<size_t>(t) * c.n_heads + h) * c.head_dim;
            const int first = window > 0 ? std::max(0, n_kv - window) : 0;
            std::vector<double> s(n_kv, -INFINITY);
            double m = -INFINITY;
            for (int j = first; j < n_kv; ++j) {
                const float *k = d.k.data() + static_cast<size_t>(j) * c.stride() + kvh * c.head_dim;
                double dot = 0.0;
                for (int i = 0; i < c.head_dim; ++i) dot += double{q[i]} * k[i];
                s[j] = dot * d.scale;
                if (softcap > 0.0) s[j] = std::tanh(s[j] / softcap) * softcap;
                m = std::max(m, s[j]);
            }
            double sum = 0.0;
            for (auto &v : s) sum += (v = std::exp(v - m));
            double *o = out.data() + (static_cast<size_t>(t) * c.n_heads + h) * c.head_dim;
            for (int j = first; j < n_kv; ++j) {
                const float *v = d.v.data() + static_cast<size_t>(j) * c.stride() + kvh * c.head_dim;
                for (int i = 0; i < c.head_dim; ++i) o[i] += s[j] / sum * v[i];
            }
        }
    return out;
}

// ---- tests ----

TEST_P(CpuOps, MatmulMatchesFloat64ReferenceForOddShapesAndTokenCounts) {
    const int64_t shapes[][2] = {{1, 16}, {7, 33}, {33, 100}, {257, 320}, {1031, 64}};
    for (const auto &shape : shapes) {
        const int64_t rows = shape[0], cols = shape[1];
        const auto w = random_floats(static_cast<size_t>(rows * cols), static_cast<uint32_t>(rows + cols));
        const strata_tensor_view view = f32_view(w, rows, cols);
        for (int n_tokens = 1; n_tokens <= 9; ++n_tokens) {
            const auto x = random_floats(static_cast<size_t>(n_tokens * cols), static_cast<uint32_t>(n_tokens));
            std::vector<float> y(static_cast<size_t>(rows * n_tokens), NAN);
            ASSERT_EQ(ops().matmul(dev(), &view, x.data(), n_tokens, y.data(), &st_), STRATA_OK) << st_.message;
            EXPECT_LT(normwise_error(y, ref_matmul(w, rows, cols, x, n_tokens)), f32_tolerance)
                << rows << "x" << cols << ", " << n_tokens << " tokens";
        }
    }
}

TEST_P(CpuOps, MatmulWithManyTokensCoversEveryTokenBlock) {
    const int64_t rows = 45, cols = 40;
    const int n_tokens = 37; // more than two token blocks, with a remainder
    const auto w = random_floats(static_cast<size_t>(rows * cols), 5);
    const auto x = random_floats(static_cast<size_t>(n_tokens * cols), 6);
    const strata_tensor_view view = f32_view(w, rows, cols);
    std::vector<float> y(static_cast<size_t>(rows * n_tokens), NAN);
    ASSERT_EQ(ops().matmul(dev(), &view, x.data(), n_tokens, y.data(), &st_), STRATA_OK) << st_.message;
    EXPECT_LT(normwise_error(y, ref_matmul(w, rows, cols, x, n_tokens)), f32_tolerance);
}

TEST_P(CpuOps, EmbeddingCopiesTheRowsOfTheTokens) {
    const int64_t vocab = 50, dim = 24;
    const auto table = random_floats(static_cast<size_t>(vocab * dim), 11);
    const strata_tensor_view view = f32_view(table, vocab, dim);
    const std::vector<int32_t> tokens = {0, 49, 7, 7, 23};
    std::vector<float> out(tokens.size() * dim, NAN);
    ASSERT_EQ(ops().embedding(dev(), &view, tokens.data(), 5, out.data(), &st_), STRATA_OK) << st_.message;
    for (size_t t = 0; t < tokens.size(); ++t)
        for (int64_t i = 0; i < dim; ++i) ASSERT_EQ(out[t * dim + i], table[tokens[t] * dim + i]);
}

TEST_P(CpuOps, RmsNormMatchesFloat64Reference) {
    for (int n_tokens : {1, 5, 40}) {
        for (int dim : {37, 4096}) {
            const auto x = random_floats(static_cast<size_t>(n_tokens) * dim, 21, -3.0f, 3.0f);
            const auto w = random_floats(static_cast<size_t>(dim), 22, 0.5f, 1.5f);
            std::vector<float> out(x.size(), NAN);
            ASSERT_EQ(ops().rms_norm(dev(), x.data(), w.data(), n_tokens, dim, 1e-5f, out.data(), &st_), STRATA_OK)
                << st_.message;
            EXPECT_LT(normwise_error(out, ref_rms_norm(x, w, n_tokens, dim, 1e-5)), f32_tolerance);
            // In place (out == x) gives the same result.
            auto inplace = x;
            ASSERT_EQ(ops().rms_norm(dev(), inplace.data(), w.data(), n_tokens, dim, 1e-5f, inplace.data(), &st_),
                      STRATA_OK);
            EXPECT_EQ(inplace, out);
        }
    }
}

TEST_P(CpuOps, RopeMatchesFloat64ReferenceInBothModes) {
    struct shape { int n_heads, head_dim, rot_dims; };
    for (int mode : {STRATA_ROPE_PAIRS, STRATA_ROPE_NEOX}) {
        for (const shape s : {shape{4, 64, 64}, shape{3, 20, 12}}) {
            for (int n_tokens : {1, 5}) {
                // Positions continue a cache (prefill after 9 tokens); kept small so float theta stays exact enough.
                std::vector<int32_t> pos;
                for (int t = 0; t < n_tokens; ++t) pos.push_back(9 + t);
                const auto x = random_floats(static_cast<size_t>(n_tokens) * s.n_heads * s.head_dim, 31);
                auto got = x;
                ASSERT_EQ(ops().rope(dev(), got.data(), n_tokens, s.n_heads, s.head_dim, s.rot_dims, pos.data(),
                                     10000.0f, mode, &st_),
                          STRATA_OK)
                    << st_.message;
                EXPECT_LT(normwise_error(got, ref_rope(x, n_tokens, s.n_heads, s.head_dim, s.rot_dims, pos, 10000.0,
                                                       mode)),
                          f32_tolerance)
                    << "mode " << mode << ", rot_dims " << s.rot_dims << ", " << n_tokens << " tokens";
                // Dimensions past rot_dims (in the first head) are left alone.
                for (size_t i = static_cast<size_t>(s.rot_dims); i < static_cast<size_t>(s.head_dim); ++i) {
                    EXPECT_EQ(got[i], x[i]);
                }
            }
        }
    }
}

// ggml's rope in its exact float order (ggml_rope_cache_init, rope_yarn without YaRN): theta *= theta_scale per
// pair, the angle (theta / factor) * freq_scale, cosf/sinf; x is n_tokens rows of n_heads * head_dim.
std::vector<float> ggml_rope_recipe(std::vector<float> x, const std::vector<int32_t> &pos, int n_heads, int head_dim,
                                    int rot_dims, float base, int mode, float freq_scale = 1.0f,
                                    const float *factors = nullptr) {
    const float theta_scale = powf(base, -2.0f / rot_dims);
    const int partner = mode == STRATA_ROPE_NEOX ? rot_dims / 2 : 1;
    for (size_t t = 0; t < pos.size(); ++t)
        for (int h = 0; h < n_heads; ++h) {
            float theta = static_cast<float>(pos[t]);
            for (int i = 0; i < rot_dims / 2; ++i) {
                const float angle = theta / (factors ? factors[i] : 1.0f) * freq_scale;
                const float c = cosf(angle), s = sinf(angle);
                float *v = x.data() + (t * n_heads + h) * head_dim + (mode == STRATA_ROPE_NEOX ? i : 2 * i);
                const float x0 = v[0], x1 = v[partner];
                v[0] = x0 * c - x1 * s;
                v[partner] = x0 * s + x1 * c;
                theta *= theta_scale;
            }
        }
    return x;
}

// The exact float recipe of ggml's rope, which greedy decoding parity with llama.cpp depends on; checked at a large
// position where a different recipe would differ in the last bits.
TEST_P(CpuOps, RopeFollowsGgmlFloatRecipe) {
    const int n_heads = 2, head_dim = 128, rot_dims = 128;
    const std::vector<int32_t> pos = {4093};
    for (int mode : {STRATA_ROPE_PAIRS, STRATA_ROPE_NEOX}) {
        const auto x = random_floats(static_cast<size_t>(n_heads) * head_dim, 41);
        auto got = x;
        ASSERT_EQ(ops().rope(dev(), got.data(), 1, n_heads, head_dim, rot_dims, pos.data(), 500000.0f, mode, &st_),
                  STRATA_OK);
        const auto want = ggml_rope_recipe(x, pos, n_heads, head_dim, rot_dims, 500000.0f, mode);
        for (size_t i = 0; i < got.size(); ++i) ASSERT_FLOAT_EQ(got[i], want[i]) << "element " << i;
    }
}

// rope_ext (ABI 1.11): ggml_rope_ext's angle without YaRN, (pos * theta_scale^i / freq_factors[i]) * freq_scale, in
// that float order (Llama 3.1's rope_freqs tensor; linear RoPE scaling as 1 / factor); without factors and with
// scale 1 it is `rope` bit for bit.
TEST_P(CpuOps, RopeExtFollowsGgmlWithFrequencyFactorsAndLinearScale) {
    const int n_heads = 2, head_dim = 64, rot_dims = 64;
    const std::vector<int32_t> pos = {3, 1021};
    const auto factors = random_floats(rot_dims / 2, 43, 1.0f, 8.0f);
    for (int mode : {STRATA_ROPE_PAIRS, STRATA_ROPE_NEOX}) {
        const auto x = random_floats(pos.size() * n_heads * head_dim, 42);
        auto got = x;
        ASSERT_EQ(ops().rope_ext(dev(), got.data(), 2, n_heads, head_dim, rot_dims, pos.data(), 500000.0f, mode, 0.25f,
                                 factors.data(), &st_),
                  STRATA_OK)
            << st_.message;
        const auto want = ggml_rope_recipe(x, pos, n_heads, head_dim, rot_dims, 500000.0f, mode, 0.25f, factors.data());
        for (size_t i = 0; i < got.size(); ++i) ASSERT_FLOAT_EQ(got[i], want[i]) << "element " << i;

        auto plain = x, ext = x;
        ASSERT_EQ(ops().rope(dev(), plain.data(), 2, n_heads, head_dim, rot_dims, pos.data(), 500000.0f, mode, &st_), 0);
        ASSERT_EQ(ops().rope_ext(dev(), ext.data(), 2, n_heads, head_dim, rot_dims, pos.data(), 500000.0f, mode, 1.0f,
                                 nullptr, &st_),
                  0);
        EXPECT_EQ(ext, plain) << "rope_ext without factors and with scale 1 is rope";
    }
}

// ggml's rope_yarn, restated: theta_interp = freq_scale * theta_extrap; with ext_factor the ramp over i0 / 2 mixes in
// theta_extrap and the magnitude grows by 1 + 0.1 ln(1 / freq_scale); cos and sin times mscale.
std::vector<float> ggml_rope_yarn_recipe(std::vector<float> x, const std::vector<int32_t> &pos, int n_heads,
                                         int head_dim, int rot_dims, float base, int mode, float freq_scale,
                                         const float *factors, float ext_factor, float low, float high,
                                         float attn_factor) {
    const float theta_scale = powf(base, -2.0f / rot_dims);
    const int partner = mode == STRATA_ROPE_NEOX ? rot_dims / 2 : 1;
    for (size_t t = 0; t < pos.size(); ++t)
        for (int h = 0; h < n_heads; ++h) {
            float theta_base = static_cast<float>(pos[t]);
            for (int i0 = 0; i0 < rot_dims; i0 += 2) {
                const float theta_extrap = theta_base / (factors ? factors[i0 / 2] : 1.0f);
                const float theta_interp = freq_scale * theta_extrap;
                float theta = theta_interp, mscale = attn_factor;
                if (ext_factor != 0.0f) {
                    const float y = (i0 / 2 - low) / std::max(0.001f, high - low);
                    const float ramp_mix = (1 - std::min(1.0f, std::max(0.0f, y))) * ext_factor;
                    theta = theta_interp * (1 - ramp_mix) + theta_extrap * ramp_mix;
                    mscale *= 1.0f + 0.1f * logf(1.0f / freq_scale);
                }
                const float c = cosf(theta) * mscale, s = sinf(theta) * mscale;
                float *v = x.data() + (t * n_heads + h) * head_dim + (mode == STRATA_ROPE_NEOX ? i0 / 2 : i0);
                const float x0 = v[0], x1 = v[partner];
                v[0] = x0 * c - x1 * s;
                v[partner] = x0 * s + x1 * c;
                theta_base *= theta_scale;
            }
        }
    return x;
}

// rope_scaled (ABI 1.13): YaRN (ext_factor 1 with a ramp between the correction dims, freq_scale 1/4) and LongRoPE's
// magnitude (attn_factor with frequency factors), in ggml's float recipe; with attn_factor 1 and ext_factor 0 it is
// rope_ext bit for bit.
TEST_P(CpuOps, RopeScaledFollowsGgmlYarnAndMagnitude) {
    const int n_heads = 2, head_dim = 64, rot_dims = 48; // partial rotary: the last 16 dims pass through
    const std::vector<int32_t> pos = {3, 1021, 30000};
    const auto factors = random_floats(rot_dims / 2, 45, 1.0f, 30.0f);
    for (int mode : {STRATA_ROPE_PAIRS, STRATA_ROPE_NEOX})
        for (const bool yarn : {true, false}) {
            const auto x = random_floats(pos.size() * n_heads * head_dim, 46);
            strata_rope_args a = strata::plugin::rope_ext_args(
                static_cast<int32_t>(pos.size()), n_heads, head_dim, rot_dims, pos.data(), 1000000.0f, mode,
                yarn ? 0.25f : 1.0f, yarn ? nullptr : factors.data());
            a.attn_factor = yarn ? 1.0f : 1.1902f;
            a.ext_factor = yarn ? 1.0f : 0.0f;
            a.corr_low = yarn ? 5.0f : 0.0f;
            a.corr_high = yarn ? 17.0f : 0.0f;
            auto got = x;
            ASSERT_EQ(ops().rope_scaled(dev(), got.data(), &a, &st_), STRATA_OK) << st_.message;
            const auto want = ggml_rope_yarn_recipe(x, pos, n_heads, head_dim, rot_dims, a.theta_base, mode,
                                                    a.freq_scale, a.freq_factors, a.ext_factor, a.corr_low,
                                                    a.corr_high, a.attn_factor);
            for (size_t i = 0; i < got.size(); ++i)
                ASSERT_FLOAT_EQ(got[i], want[i]) << "element " << i << (yarn ? " (YaRN)" : " (LongRoPE)");
            for (size_t t = 0; t < pos.size(); ++t)
                for (int h = 0; h < n_heads; ++h)
                    for (int d = rot_dims; d < head_dim; ++d) {
                        const size_t at = (t * n_heads + h) * head_dim + static_cast<size_t>(d);
                        ASSERT_EQ(got[at], x[at]) << "a dim past rot_dims moved";
                    }
        }
    const auto x = random_floats(pos.size() * n_heads * head_dim, 47);
    auto ext = x, scaled = x;
    ASSERT_EQ(ops().rope_ext(dev(), ext.data(), 3, n_heads, head_dim, rot_dims, pos.data(), 10000.0f, STRATA_ROPE_NEOX,
                             0.5f, factors.data(), &st_),
              STRATA_OK);
    const strata_rope_args a = strata::plugin::rope_ext_args(3, n_heads, head_dim, rot_dims, pos.data(), 10000.0f,
                                                             STRATA_ROPE_NEOX, 0.5f, factors.data());
    ASSERT_EQ(ops().rope_scaled(dev(), scaled.data(), &a, &st_), STRATA_OK) << st_.message;
    EXPECT_EQ(scaled, ext) << "rope_scaled with attn_factor 1 and ext_factor 0 is rope_ext";
    // Bad terms are refused before anything is written.
    for (auto bad : {+[](strata_rope_args &r) { r.attn_factor = 0.0f; }, +[](strata_rope_args &r) { r.ext_factor = 2.0f; },
                     +[](strata_rope_args &r) { r.corr_high = NAN; }, +[](strata_rope_args &r) { r.struct_size = 8; }}) {
        strata_rope_args b = a;
        bad(b);
        auto y = x;
        EXPECT_EQ(ops().rope_scaled(dev(), y.data(), &b, &st_), STRATA_ERR_INVALID_ARGUMENT);
        EXPECT_EQ(y, x);
    }
}

// ABI 1.14's element-wise ops: scale exactly x * s; geglu ggml's ggml_gelu_f32 expression times up (and within 1e-6
// of float64's tanh-approximated GELU); softcap ggml's scale-tanh-scale; out may alias an input; bad terms refused.
TEST_P(CpuOps, GemmaElementwiseOpsFollowGgml) {
    const int64_t n = 100003;
    const auto g = random_floats(static_cast<size_t>(n), 71, -12.0f, 12.0f);
    const auto u = random_floats(static_cast<size_t>(n), 72, -2.0f, 2.0f);
    std::vector<float> out(static_cast<size_t>(n), NAN);
    ASSERT_EQ(ops().scale(dev(), g.data(), n, 3.5f, out.data(), &st_), STRATA_OK) << st_.message;
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[i], g[i] * 3.5f) << i;
    ASSERT_EQ(ops().geglu(dev(), g.data(), u.data(), n, out.data(), &st_), STRATA_OK) << st_.message;
    for (int64_t i = 0; i < n; ++i) {
        const float x = g[i];
        const float ggml = 0.5f * x * (1.0f + tanhf(0.79788456080286535587989211986876f * x * (1.0f + 0.044715f * x * x)));
        ASSERT_EQ(out[i], ggml * u[i]) << i;
        const double xd = x;
        const double ref = 0.5 * xd * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (xd + 0.044715 * xd * xd * xd))) * u[i];
        ASSERT_NEAR(out[i], ref, 1e-6 * std::fabs(ref) + 1e-6) << i;
    }
    auto inplace = g;
    ASSERT_EQ(ops().geglu(dev(), inplace.data(), u.data(), n, inplace.data(), &st_), STRATA_OK);
    EXPECT_EQ(inplace, out) << "out == gate";
    ASSERT_EQ(ops().softcap(dev(), g.data(), n, 5.0f, out.data(), &st_), STRATA_OK) << st_.message;
    for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(out[i], tanhf(g[i] * (1.0f / 5.0f)) * 5.0f) << i;
        ASSERT_LE(std::fabs(out[i]), 5.0f);
    }
    EXPECT_EQ(ops().softcap(dev(), g.data(), n, 0.0f, out.data(), &st_), STRATA_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(st_.message).find("cap = 0"), std::string::npos) << st_.message;
    EXPECT_EQ(ops().scale(dev(), g.data(), n, NAN, out.data(), &st_), STRATA_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(ops().geglu(dev(), g.data(), nullptr, n, out.data(), &st_), STRATA_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(ops().scale(dev(), g.data(), 0, 1.0f, out.data(), &st_), STRATA_ERR_INVALID_ARGUMENT);
}

// ABI 1.16's mixture-of-experts steps. Routing: ggml's softmax steps, the k largest largest first, weights normalised
// by their float sum when asked; a row of equal logits picks the lowest ids. matmul_id: every slot's row equals
// matmul's over that expert's rows, with x shared by the slots or one row per slot. moe_combine: the float
// multiply-then-add chain in slot order; sigmoid_gate_add: Qwen2-MoE's silu / div / mul / add. Bad arguments are
// refused with the output untouched.
TEST_P(CpuOps, MixtureOfExpertsStepsFollowGgml) {
    const int32_t n_tokens = 37, n_expert = 8, k = 2;
    auto logits = random_floats(static_cast<size_t>(n_tokens * n_expert), 81, -3.0f, 3.0f);
    std::fill(logits.begin(), logits.begin() + n_expert, 0.5f); // token 0: a tie everywhere
    std::vector<int32_t> ids(static_cast<size_t>(n_tokens * k), -1);
    std::vector<float> weights(ids.size(), NAN);
    strata_moe_route_args r{};
    r.struct_size = sizeof r;
    r.n_tokens = n_tokens;
    r.n_expert = n_expert;
    r.k = k;
    r.logits = logits.data();
    r.ids = ids.data();
    r.weights = weights.data();
    for (int32_t normalize : {0, 1}) {
        r.normalize = normalize;
        ASSERT_EQ(ops().moe_route(dev(), &r, &st_), STRATA_OK) << st_.message;
        for (int32_t t = 0; t < n_tokens; ++t) {
            std::vector<float> p(logits.begin() + t * n_expert, logits.begin() + (t + 1) * n_expert);
            const float m = *std::max_element(p.begin(), p.end());
            double sum = 0.0;
            for (float &v : p) sum += (v = std::exp(v - m));
            for (float &v : p) v *= static_cast<float>(1.0 / sum);
            std::vector<int32_t> order(static_cast<size_t>(n_expert));
            for (int32_t e = 0; e < n_expert; ++e) order[static_cast<size_t>(e)] = e;
            std::stable_sort(order.begin(), order.end(), [&](int32_t x, int32_t y) { return p[x] > p[y]; });
            const float total = normalize != 0 ? std::max(p[order[0]] + p[order[1]], 6.103515625e-5f) : 1.0f;
            for (int32_t s = 0; s < k; ++s) {
                EXPECT_EQ(ids[t * k + s], order[static_cast<size_t>(s)]) << "token " << t << " slot " << s;
                EXPECT_NEAR(weights[t * k + s], p[order[s]] / total, 1e-6f) << "token " << t << " slot " << s;
            }
        }
    }
    EXPECT_EQ(ids[0], 0);
    EXPECT_EQ(ids[1], 1) << "equal probabilities: lower ids first";
    EXPECT_EQ(weights[0] + weights[1], 1.0f);

    // matmul_id over 8 experts of 5 rows x 24 columns (F32: the float dot path).
    const int64_t rpe = 5, cols = 24;
    const auto wdata = random_floats(static_cast<size_t>(n_expert * rpe * cols), 82);
    strata_tensor_view w = f32_view(wdata, n_expert * rpe, cols);
    const auto x = random_floats(static_cast<size_t>(n_tokens * k * cols), 83);
    for (int32_t per_slot : {0, 1}) {
        std::vector<float> y(static_cast<size_t>(n_tokens * k * rpe), NAN);
        strata_matmul_id_args a{};
        a.struct_size = sizeof a;
        a.w = &w;
        a.n_expert = n_expert;
        a.n_tokens = n_tokens;
        a.k = k;
        a.ids = ids.data();
        a.x = x.data();
        a.x_per_slot = per_slot;
        a.y = y.data();
        ASSERT_EQ(ops().matmul_id(dev(), &a, &st_), STRATA_OK) << st_.message;
        for (int32_t slot = 0; slot < n_tokens * k; ++slot) {
            strata_tensor_view expert = w;
            expert.rows = rpe;
            expert.data = wdata.data() + ids[slot] * rpe * cols;
            std::vector<float> want(static_cast<size_t>(rpe));
            const float *xrow = x.data() + (per_slot != 0 ? slot : slot / k) * cols;
            ASSERT_EQ(ops().matmul(dev(), &expert, xrow, 1, want.data(), &st_), STRATA_OK);
            for (int64_t i = 0; i < rpe; ++i) ASSERT_EQ(y[slot * rpe + i], want[i]) << "slot " << slot << " row " << i;
        }
        // An id outside the experts is refused before anything is written.
        auto bad = ids;
        bad[5] = n_expert;
        a.ids = bad.data();
        std::fill(y.begin(), y.end(), 7.0f);
        EXPECT_EQ(ops().matmul_id(dev(), &a, &st_), STRATA_ERR_INVALID_ARGUMENT);
        EXPECT_NE(std::string(st_.message).find("ids[5] = 8 is outside [0, n_expert = 8)"), std::string::npos)
            << st_.message;
        EXPECT_TRUE(std::all_of(y.begin(), y.end(), [](float v) { return v == 7.0f; }));
        a.ids = ids.data();
        a.n_expert = 3; // 40 rows are not 3 equal matrices
        EXPECT_EQ(ops().matmul_id(dev(), &a, &st_), STRATA_ERR_INVALID_ARGUMENT);
        a.n_expert = n_expert;
        a.y = const_cast<float *>(x.data()); // an output over its input
        EXPECT_EQ(ops().matmul_id(dev(), &a, &st_), STRATA_ERR_INVALID_ARGUMENT);
        EXPECT_NE(std::string(st_.message).find("y overlaps x or ids"), std::string::npos) << st_.message;
    }

    const int32_t dim = 19;
    const auto ey = random_floats(static_cast<size_t>(n_tokens * k * dim), 84);
    std::vector<float> out(static_cast<size_t>(n_tokens * dim), NAN);
    ASSERT_EQ(ops().moe_combine(dev(), ey.data(), weights.data(), n_tokens, k, dim, out.data(), &st_), STRATA_OK)
        << st_.message;
    for (int32_t t = 0; t < n_tokens; ++t)
        for (int32_t i = 0; i < dim; ++i) {
            volatile float first = ey[(t * k) * dim + i] * weights[t * k];
            volatile float second = ey[(t * k + 1) * dim + i] * weights[t * k + 1];
            ASSERT_EQ(out[t * dim + i], first + second) << t << " " << i;
        }

    // Qwen2-MoE's shared expert: acc + y * (silu(g) / g), ggml's float steps.
    const auto gate = random_floats(static_cast<size_t>(n_tokens), 85, -4.0f, 4.0f);
    auto acc = random_floats(static_cast<size_t>(n_tokens * dim), 86);
    const auto before = acc;
    ASSERT_EQ(ops().sigmoid_gate_add(dev(), ey.data(), gate.data(), n_tokens, dim, acc.data(), &st_), STRATA_OK)
        << st_.message;
    for (int32_t t = 0; t < n_tokens; ++t) {
        const float g = gate[t];
        volatile float silu = g / (1.0f + expf(-g));
        volatile float sig = silu / g;
        EXPECT_NEAR(sig, 1.0 / (1.0 + std::exp(-double{g})), 1e-6);
        for (int32_t i = 0; i < dim; ++i) {
            volatile float term = ey[t * dim + i] * sig;
            ASSERT_EQ(acc[t * dim + i], before[t * dim + i] + term) << t << " " << i;
        }
    }
    EXPECT_EQ(ops().sigmoid_gate_add(dev(), ey.data(), nullptr, n_tokens, dim, acc.data(), &st_),
              STRATA_ERR_INVALID_ARGUMENT);

    r.k = n_expert + 1;
    EXPECT_EQ(ops().moe_route(dev(), &r, &st_), STRATA_ERR_INVALID_ARGUMENT);
    r.k = k;
    r.struct_size = 8;
    EXPECT_EQ(ops().moe_route(dev(), &r, &st_), STRATA_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(ops().moe_combine(dev(), ey.data(), nullptr, n_tokens, k, dim, out.data(), &st_),
              STRATA_ERR_INVALID_ARGUMENT);
}

TEST_P(CpuOps, AttentionMatchesFloat64ReferenceWithGqaAndCacheOffsets) {
    for (int ratio : {1, 2, 4}) {
        for (int n_tokens : {1, 5}) {
            for (int head_dim : {64, 20}) {
                const attention_case c{n_tokens, 8, 8 / ratio, head_dim, 11};
                const attention_data d = make_attention_data(c, static_cast<uint32_t>(ratio * 100 + n_tokens));
                std::vector<float> out(d.q.size(), NAN);
                const strata_attention_args a = attention_args(c, d, out.data());
                ASSERT_EQ(ops().attention(dev(), &a, &st_), STRATA_OK) << st_.message;
                EXPECT_LT(normwise_error(out, ref_attention(c, d)), f32_tolerance)
                    << "GQA ratio " << ratio << ", " << n_tokens << " tokens, head_dim " << head_dim;
            }
        }
    }
}

// ABI 1.14: soft-capped scores (Gemma 2's 50, here small enough to bend the scores) and a sliding window, against
// float64.
TEST_P(CpuOps, AttentionWithSoftcapAndWindowMatchesFloat64Reference) {
    for (const auto &[softcap, window] : {std::pair<float, int>{1.5f, 0}, {0.0f, 4}, {2.0f, 7}, {0.0f, 100}}) {
        const attention_case c{5, 8, 2, 64, 11};
        const attention_data d = make_attention_data(c, 91);
        std::vector<float> out(d.q.size(), NAN);
        strata_attention_args a = attention_args(c, d, out.data());
        a.softcap = softcap;
        a.window = window;
        ASSERT_EQ(ops().attention(dev(), &a, &st_), STRATA_OK) << st_.message;
        EXPECT_LT(normwise_error(out, ref_attention(c, d, softcap, window)), f32_tolerance)
            << "softcap " << softcap << " window " << window;
        if (softcap > 0.0f || window < 11) {
            EXPECT_GT(normwise_error(out, ref_attention(c, d)), 1e-3) << "the terms changed nothing";
        }
    }
}

TEST_P(CpuOps, AttentionGrowsItsScratchForLongContexts) {
    // Longer than the 4096 positions preallocated at create(), so the score buffers must grow.
    const attention_case c{2, 4, 2, 16, 6000};
    const attention_data d = make_attention_data(c, 77);
    std::vector<float> out(d.q.size(), NAN);
    const strata_attention_args a = attention_args(c, d, out.data());
    ASSERT_EQ(ops().attention(dev(), &a, &st_), STRATA_OK) << st_.message;
    EXPECT_LT(normwise_error(out, ref_attention(c, d)), f32_tolerance);
}

TEST_P(CpuOps, SwigluMatchesFloat64Reference) {
    for (int64_t n : {int64_t{13}, int64_t{100003}}) {
        const auto g = random_floats(static_cast<size_t>(n), 51, -12.0f, 12.0f);
        const auto u = random_floats(static_cast<size_t>(n), 52, -2.0f, 2.0f);
        std::vector<double> want(static_cast<size_t>(n));
        for (size_t i = 0; i < want.size(); ++i) want[i] = g[i] / (1.0 + std::exp(-double{g[i]})) * u[i];
        std::vector<float> out(static_cast<size_t>(n), NAN);
        ASSERT_EQ(ops().swiglu(dev(), g.data(), u.data(), n, out.data(), &st_), STRATA_OK) << st_.message;
        EXPECT_LT(normwise_error(out, want), f32_tolerance);
        for (size_t i = 0; i < want.size(); ++i)
            ASSERT_NEAR(out[i], want[i], 1e-5 * std::fabs(want[i]) + 1e-30) << "element " << i;
        auto inplace = g; // out == gate
        ASSERT_EQ(ops().swiglu(dev(), inplace.data(), u.data(), n, inplace.data(), &st_), STRATA_OK);
        EXPECT_EQ(inplace, out);
    }
}

TEST_P(CpuOps, AddIsExact) {
    for (int64_t n : {int64_t{1}, int64_t{13}, int64_t{100003}}) {
        const auto a = random_floats(static_cast<size_t>(n), 61);
        const auto b = random_floats(static_cast<size_t>(n), 62);
        std::vector<float> out(static_cast<size_t>(n), NAN);
        ASSERT_EQ(ops().add(dev(), a.data(), b.data(), n, out.data(), &st_), STRATA_OK) << st_.message;
        for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], a[i] + b[i]);
        auto inplace = a; // out == a
        ASSERT_EQ(ops().add(dev(), inplace.data(), b.data(), n, inplace.data(), &st_), STRATA_OK);
        EXPECT_EQ(inplace, out);
    }
}

// add_rows (ABI 1.12): a bias row added to each token, one float add per element (ggml_add's broadcast).
TEST_P(CpuOps, AddRowsAddsTheRowToEveryRowExactly) {
    for (const auto &[rows, cols] : {std::pair<int32_t, int32_t>{1, 7}, {5, 64}, {300, 1001}}) {
        const auto x = random_floats(static_cast<size_t>(rows) * static_cast<size_t>(cols), 63);
        const auto bias = random_floats(static_cast<size_t>(cols), 64);
        std::vector<float> out(x.size(), NAN);
        ASSERT_EQ(ops().add_rows(dev(), x.data(), bias.data(), rows, cols, out.data(), &st_), STRATA_OK) << st_.message;
        for (int32_t r = 0; r < rows; ++r)
            for (int32_t i = 0; i < cols; ++i) {
                const size_t at = static_cast<size_t>(r) * static_cast<size_t>(cols) + static_cast<size_t>(i);
                ASSERT_EQ(out[at], x[at] + bias[static_cast<size_t>(i)]) << "row " << r << " column " << i;
            }
        auto inplace = x; // out == x, as the model calls it
        ASSERT_EQ(ops().add_rows(dev(), inplace.data(), bias.data(), rows, cols, inplace.data(), &st_), STRATA_OK);
        EXPECT_EQ(inplace, out);
    }
}

TEST_P(CpuOps, SoftmaxMatchesFloat64Reference) {
    struct shape { int rows, cols; };
    for (const shape s : {shape{1, 1}, shape{5, 37}, shape{3, 32000}, shape{200, 300}}) {
        const auto x = random_floats(static_cast<size_t>(s.rows) * s.cols, 71, -20.0f, 20.0f);
        std::vector<double> want(x.size());
        for (int r = 0; r < s.rows; ++r) {
            const float *row = x.data() + static_cast<size_t>(r) * s.cols;
            const double m = *std::max_element(row, row + s.cols);
            double sum = 0.0;
            for (int i = 0; i < s.cols; ++i) sum += std::exp(row[i] - m);
            for (int i = 0; i < s.cols; ++i) want[static_cast<size_t>(r) * s.cols + i] = std::exp(row[i] - m) / sum;
        }
        auto got = x;
        ASSERT_EQ(ops().softmax(dev(), got.data(), s.rows, s.cols, &st_), STRATA_OK) << st_.message;
        EXPECT_LT(normwise_error(got, want), f32_tolerance) << s.rows << "x" << s.cols;
    }
}

TEST_P(CpuOps, SoftmaxTreatsMinusInfinityAsZeroProbability) {
    std::vector<float> x = {1.0f, -INFINITY, 2.0f, -INFINITY, 0.5f, 3.0f, -1.0f, 0.0f, -INFINITY, 1.5f};
    ASSERT_EQ(ops().softmax(dev(), x.data(), 1, static_cast<int32_t>(x.size()), &st_), STRATA_OK);
    EXPECT_EQ(x[1], 0.0f);
    EXPECT_EQ(x[3], 0.0f);
    EXPECT_EQ(x[8], 0.0f);
    double sum = 0.0;
    for (float v : x) sum += v;
    EXPECT_NEAR(sum, 1.0, 1e-6);
}

INSTANTIATE_TEST_SUITE_P(Threads, CpuOps, ::testing::Values(1, 2, 7),
                         [](const ::testing::TestParamInfo<int> &info) { return std::to_string(info.param) + "threads"; });

} // namespace
