// Bad arguments give STRATA_ERR_INVALID_ARGUMENT with a message, leave outputs untouched, and never crash.
#include "cpu_test_support.hpp"

namespace {

using namespace cpu_test;

class CpuBadArguments : public ::testing::Test {
  protected:
    void SetUp() override { dev_ = make_device(2); }

    // Asserts that `code` is an invalid-argument failure that wrote a message, then clears the status.
    void expect_invalid(int32_t code, const char *what) {
        EXPECT_EQ(code, STRATA_ERR_INVALID_ARGUMENT) << what;
        EXPECT_EQ(st_.code, STRATA_ERR_INVALID_ARGUMENT) << what;
        EXPECT_GT(std::strlen(st_.message), 0u) << what;
        st_ = strata_status{};
    }

    device_ptr dev_;
    strata_status st_{};
};

TEST_F(CpuBadArguments, Matmul) {
    strata_device *d = dev_.get();
    const std::vector<float> w(12, 1.0f), x(4, 1.0f);
    std::vector<float> y(3, -7.0f);
    const strata_tensor_view good = f32_view(w, 3, 4);
    ASSERT_EQ(ops().matmul(d, &good, x.data(), 1, y.data(), &st_), STRATA_OK);
    y.assign(3, -7.0f);

    expect_invalid(ops().matmul(nullptr, &good, x.data(), 1, y.data(), &st_), "null device");
    expect_invalid(ops().matmul(d, nullptr, x.data(), 1, y.data(), &st_), "null tensor");
    expect_invalid(ops().matmul(d, &good, nullptr, 1, y.data(), &st_), "null x");
    expect_invalid(ops().matmul(d, &good, x.data(), 1, nullptr, &st_), "null y");
    expect_invalid(ops().matmul(d, &good, x.data(), 0, y.data(), &st_), "zero tokens");
    expect_invalid(ops().matmul(d, &good, x.data(), -3, y.data(), &st_), "negative tokens");
    auto bad = good;
    bad.rows = 0;
    expect_invalid(ops().matmul(d, &bad, x.data(), 1, y.data(), &st_), "zero rows");
    bad = good;
    bad.quant = nullptr;
    expect_invalid(ops().matmul(d, &bad, x.data(), 1, y.data(), &st_), "no quant");
    bad = good;
    bad.data = nullptr;
    expect_invalid(ops().matmul(d, &bad, x.data(), 1, y.data(), &st_), "no data");
    bad = good;
    bad.row_bytes = 8;
    expect_invalid(ops().matmul(d, &bad, x.data(), 1, y.data(), &st_), "short rows");
    bad = good;
    bad.ggml_type = 8;
    expect_invalid(ops().matmul(d, &bad, x.data(), 1, y.data(), &st_), "type mismatch");
    bad = good;
    bad.struct_size = 8;
    expect_invalid(ops().matmul(d, &bad, x.data(), 1, y.data(), &st_), "old struct");
    EXPECT_EQ(y, std::vector<float>(3, -7.0f));
}

TEST_F(CpuBadArguments, EmbeddingRejectsOutOfRangeTokensBeforeWriting) {
    strata_device *d = dev_.get();
    const std::vector<float> table(10 * 4, 1.0f);
    const strata_tensor_view view = f32_view(table, 10, 4);
    std::vector<float> out(3 * 4, -7.0f);
    for (int32_t bad_id : {10, -1, 1 << 30}) {
        const int32_t tokens[3] = {1, 2, bad_id};
        expect_invalid(ops().embedding(d, &view, tokens, 3, out.data(), &st_), "token id out of range");
    }
    EXPECT_EQ(out, std::vector<float>(12, -7.0f)) << "the valid first tokens must not have been written";
    const int32_t tokens[1] = {0};
    expect_invalid(ops().embedding(d, &view, nullptr, 1, out.data(), &st_), "null tokens");
    expect_invalid(ops().embedding(d, &view, tokens, 0, out.data(), &st_), "zero tokens");
    expect_invalid(ops().embedding(d, &view, tokens, 1, nullptr, &st_), "null out");
    expect_invalid(ops().embedding(nullptr, &view, tokens, 1, out.data(), &st_), "null device");
}

TEST_F(CpuBadArguments, RmsNormRopeAndElementwise) {
    strata_device *d = dev_.get();
    std::vector<float> x(64, 1.0f), w(64, 1.0f), out(64);
    const int32_t pos[2] = {0, 1};
    const int32_t negative_pos[2] = {0, -4};

    expect_invalid(ops().rms_norm(d, nullptr, w.data(), 1, 64, 1e-5f, out.data(), &st_), "rms_norm null x");
    expect_invalid(ops().rms_norm(d, x.data(), nullptr, 1, 64, 1e-5f, out.data(), &st_), "rms_norm null w");
    expect_invalid(ops().rms_norm(d, x.data(), w.data(), 1, 0, 1e-5f, out.data(), &st_), "rms_norm dim 0");
    expect_invalid(ops().rms_norm(d, x.data(), w.data(), 0, 64, 1e-5f, out.data(), &st_), "rms_norm 0 tokens");
    expect_invalid(ops().rms_norm(d, x.data(), w.data(), 1, 64, -1.0f, out.data(), &st_), "rms_norm eps < 0");

    expect_invalid(ops().rope(d, x.data(), 2, 2, 16, 16, nullptr, 1e4f, 0, &st_), "rope null positions");
    expect_invalid(ops().rope(d, x.data(), 2, 2, 16, 16, negative_pos, 1e4f, 0, &st_), "rope negative position");
    expect_invalid(ops().rope(d, x.data(), 2, 2, 16, 15, pos, 1e4f, 0, &st_), "rope odd rot_dims");
    expect_invalid(ops().rope(d, x.data(), 2, 2, 16, 18, pos, 1e4f, 0, &st_), "rope rot_dims > head_dim");
    expect_invalid(ops().rope(d, x.data(), 2, 2, 16, 16, pos, 1e4f, 1, &st_), "rope unknown mode");
    expect_invalid(ops().rope(d, x.data(), 2, 2, 16, 16, pos, 0.0f, 0, &st_), "rope theta_base 0");
    expect_invalid(ops().rope(d, x.data(), 2, 0, 16, 16, pos, 1e4f, 0, &st_), "rope 0 heads");
    expect_invalid(ops().rope(d, nullptr, 2, 2, 16, 16, pos, 1e4f, 0, &st_), "rope null x");
    expect_invalid(ops().rope_ext(d, x.data(), 2, 2, 16, 16, pos, 1e4f, 0, 0.0f, nullptr, &st_), "rope freq_scale 0");
    expect_invalid(ops().rope_ext(d, x.data(), 2, 2, 16, 16, pos, 1e4f, 0, NAN, nullptr, &st_), "rope freq_scale NaN");
    EXPECT_EQ(x, std::vector<float>(64, 1.0f)) << "failed ropes must not touch x";

    expect_invalid(ops().swiglu(d, nullptr, w.data(), 64, out.data(), &st_), "swiglu null gate");
    expect_invalid(ops().swiglu(d, x.data(), w.data(), 0, out.data(), &st_), "swiglu n 0");
    expect_invalid(ops().add(d, x.data(), nullptr, 64, out.data(), &st_), "add null b");
    expect_invalid(ops().add(d, x.data(), w.data(), -1, out.data(), &st_), "add n < 0");
    expect_invalid(ops().softmax(d, nullptr, 1, 64, &st_), "softmax null");
    expect_invalid(ops().softmax(d, x.data(), 1, 0, &st_), "softmax 0 cols");
    expect_invalid(ops().add(nullptr, x.data(), w.data(), 64, out.data(), &st_), "add null device");
    expect_invalid(ops().add_rows(d, x.data(), nullptr, 2, 32, out.data(), &st_), "add_rows null row");
    expect_invalid(ops().add_rows(d, x.data(), w.data(), 0, 32, out.data(), &st_), "add_rows 0 rows");
    expect_invalid(ops().add_rows(d, x.data(), w.data(), 2, -1, out.data(), &st_), "add_rows cols < 0");
    expect_invalid(ops().add_rows(nullptr, x.data(), w.data(), 2, 32, out.data(), &st_), "add_rows null device");
}

TEST_F(CpuBadArguments, Attention) {
    strata_device *d = dev_.get();
    const attention_case c{2, 4, 2, 8, 3};
    const attention_data data = make_attention_data(c, 1);
    std::vector<float> out(data.q.size(), -7.0f);
    const strata_attention_args good = attention_args(c, data, out.data());

    expect_invalid(ops().attention(d, nullptr, &st_), "null args");
    auto a = good;
    a.n_kv_heads = 3; // 4 % 3 != 0
    expect_invalid(ops().attention(d, &a, &st_), "heads not a multiple of kv heads");
    a = good;
    a.n_kv_heads = 0;
    expect_invalid(ops().attention(d, &a, &st_), "zero kv heads");
    a = good;
    a.head_dim = -8;
    expect_invalid(ops().attention(d, &a, &st_), "negative head_dim");
    a = good;
    a.kv_row_stride = 15; // < 2 * 8
    expect_invalid(ops().attention(d, &a, &st_), "stride too small");
    a = good;
    a.k_cache = nullptr;
    expect_invalid(ops().attention(d, &a, &st_), "null k");
    a = good;
    a.positions = nullptr;
    expect_invalid(ops().attention(d, &a, &st_), "null positions");
    a = good;
    a.struct_size = 4;
    expect_invalid(ops().attention(d, &a, &st_), "old struct");
    a = good;
    a.n_tokens = 0;
    expect_invalid(ops().attention(d, &a, &st_), "zero tokens");
    EXPECT_EQ(out, std::vector<float>(out.size(), -7.0f));

    ASSERT_EQ(ops().attention(d, &good, &st_), STRATA_OK) << st_.message;
    EXPECT_EQ(st_.code, STRATA_OK);
}

TEST_F(CpuBadArguments, NullStatusIsAllowed) {
    EXPECT_EQ(ops().add(dev_.get(), nullptr, nullptr, 4, nullptr, nullptr), STRATA_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(ops().mem_alloc(dev_.get(), 0, nullptr), nullptr);
    ops().destroy(nullptr); // no-op
}

} // namespace
