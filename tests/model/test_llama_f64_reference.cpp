// One forward pass of a 110M-parameter Llama made by tools/make-model, against an independent float64 implementation
// written here (plain loops, no shared code with the plugins), to a relative error below 1e-4 in F32.
#include "engine_fixture.hpp"
#include "gguf/gguf_file.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>

namespace {

using namespace strata::testing;
namespace fs = std::filesystem;

// Builds the model once per build tree (about 440 MB of F32); later runs reuse it.
std::string model_110m_f32() {
    const fs::path dir = fs::path(STRATA_BINARY_DIR) / "test-models";
    const fs::path file = dir / "llama-110m-f32.gguf";
    if (!fs::exists(file)) {
        fs::create_directories(dir);
        const std::string cmd = std::string(STRATA_BINARY_DIR) + "/bin/make-model --out " + file.string() +
                                " --dim 768 --layers 12 --heads 12 --kv-heads 12 --ff 2048 --ctx 1024 --type f32"
                                " --seed 7 --vocab-from " + shared_path("models/vocab/ggml-vocab-llama-spm.gguf");
        if (std::system(cmd.c_str()) != 0) return {};
    }
    return file.string();
}

struct reference_model {
    const strata::gguf::file &f;
    int64_t d, L, H, Hkv, hd, ff, V;
    double eps, theta;

    const float *w(const std::string &name) const {
        const auto *t = f.find_tensor(name);
        if (t == nullptr || t->type != 0) throw std::runtime_error("reference needs F32 tensor " + name);
        return reinterpret_cast<const float *>(t->data);
    }

    // y = W x, W rows x cols row-major.
    static std::vector<double> matvec(const float *W, int64_t rows, int64_t cols, const std::vector<double> &x) {
        std::vector<double> y(static_cast<size_t>(rows));
        for (int64_t r = 0; r < rows; ++r) {
            double s = 0;
            for (int64_t c = 0; c < cols; ++c) s += static_cast<double>(W[r * cols + c]) * x[static_cast<size_t>(c)];
            y[static_cast<size_t>(r)] = s;
        }
        return y;
    }
    std::vector<double> rmsnorm(const std::vector<double> &x, const float *g) const {
        double ss = 0;
        for (double v : x) ss += v * v;
        const double inv = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + eps);
        std::vector<double> y(x.size());
        for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * g[i];
        return y;
    }
    void rope(std::vector<double> &x, int64_t heads, int64_t pos) const {
        for (int64_t h = 0; h < heads; ++h) {
            for (int64_t i = 0; i < hd / 2; ++i) {
                const double freq = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(hd));
                const double a = static_cast<double>(pos) * freq;
                double &x0 = x[static_cast<size_t>(h * hd + 2 * i)];
                double &x1 = x[static_cast<size_t>(h * hd + 2 * i + 1)];
                const double r0 = x0 * std::cos(a) - x1 * std::sin(a);
                const double r1 = x0 * std::sin(a) + x1 * std::cos(a);
                x0 = r0;
                x1 = r1;
            }
        }
    }

    std::vector<double> logits(const std::vector<int32_t> &tokens) const {
        const size_t n = tokens.size();
        std::vector<std::vector<std::vector<double>>> K(static_cast<size_t>(L)), Vc(static_cast<size_t>(L));
        const float *emb = w("token_embd.weight");
        std::vector<double> x;
        for (size_t t = 0; t < n; ++t) {
            x.assign(emb + tokens[t] * d, emb + (tokens[t] + 1) * d);
            for (int64_t l = 0; l < L; ++l) {
                const std::string b = "blk." + std::to_string(l) + ".";
                auto xb = rmsnorm(x, w(b + "attn_norm.weight"));
                auto q = matvec(w(b + "attn_q.weight"), H * hd, d, xb);
                auto k = matvec(w(b + "attn_k.weight"), Hkv * hd, d, xb);
                auto v = matvec(w(b + "attn_v.weight"), Hkv * hd, d, xb);
                rope(q, H, static_cast<int64_t>(t));
                rope(k, Hkv, static_cast<int64_t>(t));
                K[static_cast<size_t>(l)].push_back(k);
                Vc[static_cast<size_t>(l)].push_back(v);
                std::vector<double> att(static_cast<size_t>(H * hd), 0.0);
                for (int64_t h = 0; h < H; ++h) {
                    const int64_t kh = h / (H / Hkv);
                    std::vector<double> s(t + 1);
                    double mx = -1e300;
                    for (size_t j = 0; j <= t; ++j) {
                        double dot = 0;
                        for (int64_t i = 0; i < hd; ++i)
                            dot += q[static_cast<size_t>(h * hd + i)] * K[static_cast<size_t>(l)][j][static_cast<size_t>(kh * hd + i)];
                        s[j] = dot / std::sqrt(static_cast<double>(hd));
                        mx = std::max(mx, s[j]);
                    }
                    double sum = 0;
                    for (double &e : s) sum += (e = std::exp(e - mx));
                    for (size_t j = 0; j <= t; ++j)
                        for (int64_t i = 0; i < hd; ++i)
                            att[static_cast<size_t>(h * hd + i)] += s[j] / sum * Vc[static_cast<size_t>(l)][j][static_cast<size_t>(kh * hd + i)];
                }
                auto o = matvec(w(b + "attn_output.weight"), d, H * hd, att);
                for (int64_t i = 0; i < d; ++i) x[static_cast<size_t>(i)] += o[static_cast<size_t>(i)];
                xb = rmsnorm(x, w(b + "ffn_norm.weight"));
                auto g = matvec(w(b + "ffn_gate.weight"), ff, d, xb);
                auto u = matvec(w(b + "ffn_up.weight"), ff, d, xb);
                for (int64_t i = 0; i < ff; ++i) {
                    const double gi = g[static_cast<size_t>(i)];
                    g[static_cast<size_t>(i)] = gi / (1.0 + std::exp(-gi)) * u[static_cast<size_t>(i)];
                }
                auto dn = matvec(w(b + "ffn_down.weight"), d, ff, g);
                for (int64_t i = 0; i < d; ++i) x[static_cast<size_t>(i)] += dn[static_cast<size_t>(i)];
            }
        }
        auto xn = rmsnorm(x, w("output_norm.weight"));
        const float *out = f.find_tensor("output.weight") ? w("output.weight") : emb;
        return matvec(out, V, d, xn);
    }
};

TEST(LlamaF64Reference, LogitsOf110MModelMatchFloat64Reference) {
    const std::string path = model_110m_f32();
    ASSERT_FALSE(path.empty()) << "make-model failed";
    auto f = strata::gguf::file::open(path);
    reference_model ref{f,
                        static_cast<int64_t>(*f.get_uint("llama.embedding_length")),
                        static_cast<int64_t>(*f.get_uint("llama.block_count")),
                        static_cast<int64_t>(*f.get_uint("llama.attention.head_count")),
                        static_cast<int64_t>(*f.get_uint("llama.attention.head_count_kv")),
                        0,
                        static_cast<int64_t>(*f.get_uint("llama.feed_forward_length")),
                        static_cast<int64_t>(f.get_string_array("tokenizer.ggml.tokens")->size()),
                        *f.get_float("llama.attention.layer_norm_rms_epsilon"),
                        *f.get_float("llama.rope.freq_base")};
    ref.hd = ref.d / ref.H;
    ASSERT_EQ(ref.d, 768);

    auto e = make_engine(path, 64, 4);
    const std::vector<int32_t> tokens = e->tokenizer().encode("The quick brown fox jumps", true);
    std::vector<int32_t> positions(tokens.size());
    for (size_t i = 0; i < positions.size(); ++i) positions[i] = static_cast<int32_t>(i);
    const float *got = e->forward_for_testing(tokens.data(), positions.data(), static_cast<int32_t>(tokens.size()));
    const std::vector<double> want = ref.logits(tokens);

    double num = 0, den = 0, max_abs_err = 0, max_abs = 0;
    for (size_t i = 0; i < want.size(); ++i) {
        const double diff = static_cast<double>(got[i]) - want[i];
        num += diff * diff;
        den += want[i] * want[i];
        max_abs_err = std::max(max_abs_err, std::abs(diff));
        max_abs = std::max(max_abs, std::abs(want[i]));
    }
    const double rel_l2 = std::sqrt(num / den);
    std::printf("110M F32 logits vs float64: relative L2 error %.3g, max abs error %.3g (max |logit| %.3g)\n", rel_l2,
                max_abs_err, max_abs);
    EXPECT_GT(max_abs, 0.1) << "logits are degenerate; the model is not exercising the math";
    EXPECT_LT(rel_l2, 1e-4);
    EXPECT_LT(max_abs_err / max_abs, 1e-4);
}

} // namespace
