// Matmul and embedding over the ggml_quants plugin's Q8_0 format (built only when strata_ggml_quants_impl exists).
#include "cpu_test_support.hpp"

#include "ggml_quants.hpp"

namespace {

using namespace cpu_test;

const strata_quant_desc *find_q8_0(strata::quants::kernel_set set) {
    const strata_quant_desc *all = strata::quants::descriptors(set);
    for (int i = 0; i < strata::quants::n_descriptors(); ++i)
        if (std::strcmp(all[i].header.name, "q8_0") == 0) return &all[i];
    return nullptr;
}

struct q8_0_matrix {
    std::vector<unsigned char> bytes;
    strata_tensor_view view{};
};

q8_0_matrix quantize(const strata_quant_desc &q, const std::vector<float> &w, int64_t rows, int64_t cols) {
    q8_0_matrix m;
    const int64_t row_bytes = cols / q.block_elems * q.block_bytes;
    m.bytes.resize(static_cast<size_t>(rows * row_bytes));
    for (int64_t r = 0; r < rows; ++r) q.quantize_row(w.data() + r * cols, m.bytes.data() + r * row_bytes, cols);
    m.view.struct_size = sizeof m.view;
    m.view.ggml_type = q.ggml_type;
    m.view.quant = &q;
    m.view.data = m.bytes.data();
    m.view.rows = rows;
    m.view.cols = cols;
    m.view.row_bytes = row_bytes;
    m.view.name = "test.q8_0";
    return m;
}

class CpuQ8_0 : public ::testing::TestWithParam<int> {};

TEST_P(CpuQ8_0, MatmulEqualsRowDotsAndApproximatesFloat64) {
    std::vector<strata::quants::kernel_set> sets = {strata::quants::kernel_set::scalar};
    if (strata::quants::cpu_has_avx2_fma()) sets.push_back(strata::quants::kernel_set::avx2_fma);
    device_ptr dev = make_device(GetParam());
    ASSERT_NE(dev, nullptr);
    for (auto set : sets) {
        const strata_quant_desc *q = find_q8_0(set);
        ASSERT_NE(q, nullptr);
        const int64_t rows = 67, cols = 256;
        const auto w = random_floats(static_cast<size_t>(rows * cols), 3);
        const q8_0_matrix m = quantize(*q, w, rows, cols);
        std::vector<float> deq(static_cast<size_t>(rows * cols));
        for (int64_t r = 0; r < rows; ++r)
            q->dequantize_row(m.bytes.data() + r * m.view.row_bytes, deq.data() + r * cols, cols);

        for (int n_tokens : {1, 4, 9}) {
            const auto x = random_floats(static_cast<size_t>(n_tokens * cols), 4);
            std::vector<float> y(static_cast<size_t>(rows * n_tokens), NAN);
            strata_status st{};
            ASSERT_EQ(ops().matmul(dev.get(), &m.view, x.data(), n_tokens, y.data(), &st), STRATA_OK) << st.message;
            std::vector<double> want(y.size());
            for (int t = 0; t < n_tokens; ++t)
                for (int64_t r = 0; r < rows; ++r) {
                    // The device must call exactly the format's kernel on row r and token t.
                    ASSERT_EQ(y[t * rows + r], q->dot_f32(m.bytes.data() + r * m.view.row_bytes, x.data() + t * cols,
                                                          cols));
                    double s = 0.0;
                    for (int64_t c = 0; c < cols; ++c) s += double{deq[r * cols + c]} * x[t * cols + c];
                    want[t * rows + r] = s;
                }
            // Loose: the kernel may quantize the activations to 8 bits as ggml does.
            EXPECT_LT(normwise_error(y, want), 2e-2) << strata::quants::kernel_set_name(set);
        }
    }
}

TEST_P(CpuQ8_0, EmbeddingDequantizesRows) {
    device_ptr dev = make_device(GetParam());
    const strata_quant_desc *q = find_q8_0(strata::quants::kernel_set::scalar);
    ASSERT_NE(q, nullptr);
    const int64_t vocab = 20, dim = 64;
    const q8_0_matrix m = quantize(*q, random_floats(static_cast<size_t>(vocab * dim), 5), vocab, dim);
    const int32_t tokens[3] = {19, 0, 7};
    std::vector<float> out(3 * dim), want(dim);
    strata_status st{};
    ASSERT_EQ(ops().embedding(dev.get(), &m.view, tokens, 3, out.data(), &st), STRATA_OK) << st.message;
    for (int t = 0; t < 3; ++t) {
        q->dequantize_row(m.bytes.data() + tokens[t] * m.view.row_bytes, want.data(), dim);
        EXPECT_TRUE(std::equal(want.begin(), want.end(), out.begin() + t * dim)) << "token " << tokens[t];
    }
}

INSTANTIATE_TEST_SUITE_P(Threads, CpuQ8_0, ::testing::Values(1, 3),
                         [](const ::testing::TestParamInfo<int> &info) { return std::to_string(info.param) + "threads"; });

} // namespace
