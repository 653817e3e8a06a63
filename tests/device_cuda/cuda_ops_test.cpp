// RMSNorm, RoPE, attention, SwiGLU, add and softmax on the GPU against the CPU device on the same random inputs.
// Bound: normwise error (max |gpu - cpu| / max |cpu|) < 1e-4 for every op; add must be exact.
#include "cuda_test_support.hpp"

namespace {

using namespace cuda_test;

class CudaOps : public ::testing::Test {
  protected:
    void SetUp() override {
        REQUIRE_GPU();
        strata_status st{};
        gpu_ = create_device(loaded().cuda, &st);
        ASSERT_NE(gpu_, nullptr) << st.message;
        cpu_ = create_device(loaded().cpu, &st);
        ASSERT_NE(cpu_, nullptr) << st.message;
    }
    const strata_device_desc &cuda() const { return *loaded().cuda; }
    const strata_device_desc &cpu() const { return *loaded().cpu; }
    strata_device *gpu_dev() const { return gpu_.get(); }
    strata_device *cpu_dev() const { return cpu_.get(); }

    device_ptr gpu_{nullptr, device_deleter{loaded().cuda}};
    device_ptr cpu_{nullptr, device_deleter{loaded().cpu}};
    strata_status st_{};
};

TEST_F(CudaOps, RmsNormMatchesCpuAlsoInPlace) {
    for (const auto &[n_tokens, dim] : {std::pair<int32_t, int32_t>{5, 2048}, {3, 100}, {1, 4096}}) {
        SCOPED_TRACE(testing::Message() << n_tokens << " x " << dim);
        const auto x = random_floats(static_cast<size_t>(n_tokens * dim), 31, -3.0f, 3.0f);
        const auto w = random_floats(static_cast<size_t>(dim), 32, 0.5f, 1.5f);
        auto x_dev = to_device(gpu_dev(), x);
        auto w_dev = to_device(gpu_dev(), w);
        device_buffer out_dev(gpu_dev(), x.size() * sizeof(float));
        ASSERT_EQ(cuda().rms_norm(gpu_dev(), x_dev->f(), w_dev->f(), n_tokens, dim, 1e-5f, out_dev.f(), &st_),
                  STRATA_OK)
            << st_.message;
        std::vector<float> want(x.size());
        ASSERT_EQ(cpu().rms_norm(cpu_dev(), x.data(), w.data(), n_tokens, dim, 1e-5f, want.data(), &st_), STRATA_OK);
        EXPECT_LT(normwise_error(floats_from(gpu_dev(), out_dev.get(), x.size()), want), 1e-4);
        // out == x
        ASSERT_EQ(cuda().rms_norm(gpu_dev(), x_dev->f(), w_dev->f(), n_tokens, dim, 1e-5f, x_dev->f(), &st_),
                  STRATA_OK);
        EXPECT_LT(normwise_error(floats_from(gpu_dev(), x_dev->get(), x.size()), want), 1e-4);
    }
}

TEST_F(CudaOps, RopeMatchesCpuInBothModes) {
    struct rope_case {
        int32_t n_heads, head_dim, rot_dims, mode;
    };
    const std::vector<int32_t> positions = {0, 1, 7, 511, 4000};
    const auto n_tokens = static_cast<int32_t>(positions.size());
    for (const rope_case c : {rope_case{4, 64, 64, STRATA_ROPE_PAIRS}, rope_case{4, 64, 64, STRATA_ROPE_NEOX},
                              rope_case{3, 128, 32, STRATA_ROPE_PAIRS}, rope_case{3, 128, 32, STRATA_ROPE_NEOX}}) {
        SCOPED_TRACE(testing::Message() << "heads " << c.n_heads << " head_dim " << c.head_dim << " rot_dims "
                                        << c.rot_dims << " mode " << c.mode);
        auto x = random_floats(static_cast<size_t>(n_tokens * c.n_heads * c.head_dim), 41, -2.0f, 2.0f);
        auto x_dev = to_device(gpu_dev(), x);
        ASSERT_EQ(cuda().rope(gpu_dev(), x_dev->f(), n_tokens, c.n_heads, c.head_dim, c.rot_dims, positions.data(),
                              10000.0f, c.mode, &st_),
                  STRATA_OK)
            << st_.message;
        ASSERT_EQ(cpu().rope(cpu_dev(), x.data(), n_tokens, c.n_heads, c.head_dim, c.rot_dims, positions.data(),
                             10000.0f, c.mode, &st_),
                  STRATA_OK);
        EXPECT_LT(normwise_error(floats_from(gpu_dev(), x_dev->get(), x.size()), x), 1e-4);
    }
}

TEST_F(CudaOps, AttentionMatchesCpu) {
    // Decode and prefill, GQA and MHA, a head_dim that is not a multiple of 32, the largest head_dim, long context.
    for (const attention_case c : {attention_case{1, 8, 2, 64, 100}, attention_case{5, 4, 4, 128, 0},
                                   attention_case{3, 6, 3, 80, 37}, attention_case{1, 2, 1, 256, 2000},
                                   attention_case{17, 8, 8, 64, 3}}) {
        SCOPED_TRACE(testing::Message() << c.n_tokens << " tokens, " << c.n_heads << "/" << c.n_kv_heads
                                        << " heads, head_dim " << c.head_dim << ", from " << c.first_pos);
        const attention_data d = make_attention_data(c, 51);
        auto q_dev = to_device(gpu_dev(), d.q);
        auto k_dev = to_device(gpu_dev(), d.k);
        auto v_dev = to_device(gpu_dev(), d.v);
        device_buffer out_dev(gpu_dev(), d.q.size() * sizeof(float));
        std::vector<float> want(d.q.size());
        const strata_attention_args on_cpu = attention_args(c, d, want.data());
        ASSERT_EQ(cpu().attention(cpu_dev(), &on_cpu, &st_), STRATA_OK) << st_.message;

        strata_attention_args a = attention_args(c, d, q_dev->f(), k_dev->f(), v_dev->f(), out_dev.f());
        ASSERT_EQ(cuda().attention(gpu_dev(), &a, &st_), STRATA_OK) << st_.message;
        EXPECT_LT(normwise_error(floats_from(gpu_dev(), out_dev.get(), d.q.size()), want), 1e-4);
        a.out = q_dev->f(); // out may alias q
        ASSERT_EQ(cuda().attention(gpu_dev(), &a, &st_), STRATA_OK) << st_.message;
        EXPECT_LT(normwise_error(floats_from(gpu_dev(), q_dev->get(), d.q.size()), want), 1e-4);
    }
}

TEST_F(CudaOps, AttentionRefusesWhatItCannotRun) {
    device_buffer buf(gpu_dev(), 1 << 20);
    const int32_t pos = 0;
    strata_attention_args a{};
    a.struct_size = sizeof a;
    a.n_tokens = 1;
    a.n_heads = 1;
    a.n_kv_heads = 1;
    a.head_dim = 512; // above the kernel's 256
    a.kv_row_stride = 512;
    a.positions = &pos;
    a.q = a.k_cache = a.v_cache = buf.f();
    a.out = buf.f();
    a.scale = 1.0f;
    EXPECT_EQ(cuda().attention(gpu_dev(), &a, &st_), STRATA_ERR_UNSUPPORTED);
    EXPECT_NE(std::strstr(st_.message, "head_dim"), nullptr) << st_.message;
    a.head_dim = 64;
    a.n_heads = 3;
    a.n_kv_heads = 2;
    EXPECT_EQ(cuda().attention(gpu_dev(), &a, &st_), STRATA_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::strstr(st_.message, "multiple"), nullptr) << st_.message;
}

TEST_F(CudaOps, SwigluAddSoftmaxMatchCpu) {
    const int64_t n = 10007; // not a multiple of any block size
    const auto g = random_floats(static_cast<size_t>(n), 61, -6.0f, 6.0f);
    const auto u = random_floats(static_cast<size_t>(n), 62, -2.0f, 2.0f);
    auto g_dev = to_device(gpu_dev(), g);
    auto u_dev = to_device(gpu_dev(), u);
    device_buffer out_dev(gpu_dev(), g.size() * sizeof(float));
    std::vector<float> want(g.size());

    ASSERT_EQ(cuda().swiglu(gpu_dev(), g_dev->f(), u_dev->f(), n, out_dev.f(), &st_), STRATA_OK) << st_.message;
    ASSERT_EQ(cpu().swiglu(cpu_dev(), g.data(), u.data(), n, want.data(), &st_), STRATA_OK);
    EXPECT_LT(normwise_error(floats_from(gpu_dev(), out_dev.get(), g.size()), want), 1e-4);

    ASSERT_EQ(cuda().add(gpu_dev(), g_dev->f(), u_dev->f(), n, out_dev.f(), &st_), STRATA_OK) << st_.message;
    ASSERT_EQ(cpu().add(cpu_dev(), g.data(), u.data(), n, want.data(), &st_), STRATA_OK);
    EXPECT_EQ(floats_from(gpu_dev(), out_dev.get(), g.size()), want);
    // out == a
    ASSERT_EQ(cuda().add(gpu_dev(), g_dev->f(), u_dev->f(), n, g_dev->f(), &st_), STRATA_OK) << st_.message;
    EXPECT_EQ(floats_from(gpu_dev(), g_dev->get(), g.size()), want);

    const int32_t rows = 3, cols = 32000; // a vocabulary-sized row
    auto logits = random_floats(static_cast<size_t>(rows * cols), 63, -10.0f, 10.0f);
    auto logits_dev = to_device(gpu_dev(), logits);
    ASSERT_EQ(cuda().softmax(gpu_dev(), logits_dev->f(), rows, cols, &st_), STRATA_OK) << st_.message;
    ASSERT_EQ(cpu().softmax(cpu_dev(), logits.data(), rows, cols, &st_), STRATA_OK);
    const auto probs = floats_from(gpu_dev(), logits_dev->get(), logits.size());
    for (int32_t r = 0; r < rows; ++r) {
        const std::vector<float> got(probs.begin() + r * cols, probs.begin() + (r + 1) * cols);
        const std::vector<float> ref(logits.begin() + r * cols, logits.begin() + (r + 1) * cols);
        EXPECT_LT(normwise_error(got, ref), 1e-4) << "row " << r;
    }
}

} // namespace
