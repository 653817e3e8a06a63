// Matmul and embedding over the ggml_quants plugin's Q8_0 and Q4_0 formats (built only when strata_ggml_quants_impl
// exists). Both formats offer the integer paths, so the device must quantize each token's activations once and call
// gemm_act (ABI 1.22) for every matmul; a descriptor from before 1.22 gets dot_act (ABI 1.1) and, for several
// tokens, dot_act_multi (ABI 1.2). The F32 test format in cpu_test_support.hpp keeps covering the float path.
#include "cpu_test_support.hpp"

#include "ggml_quants.hpp"

#include <atomic>

namespace {

using namespace cpu_test;

const strata_quant_desc *find_format(strata::quants::kernel_set set, const char *name) {
    const strata_quant_desc *all = strata::quants::descriptors(set);
    for (int i = 0; i < strata::quants::n_descriptors(); ++i)
        if (std::strcmp(all[i].header.name, name) == 0) return &all[i];
    return nullptr;
}

struct quant_matrix {
    std::vector<unsigned char> bytes;
    strata_tensor_view view{};
};

quant_matrix quantize(const strata_quant_desc &q, const std::vector<float> &w, int64_t rows, int64_t cols) {
    quant_matrix m;
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
    m.view.name = "test.quant";
    return m;
}

// One output of the format's own integer path, the way the device must compute it: gemm_act's one-row, one-vector
// call where the descriptor has the slot (its bits are the same in any call), else dot_act.
float one_output(const strata_quant_desc *q, const unsigned char *row, const void *xq, int64_t cols) {
    if (!STRATA_HAS_SLOT(q, gemm_act)) return q->dot_act(row, xq, cols);
    float out = NAN;
    q->gemm_act(row, 0, 1, xq, 0, 1, cols, &out, 1);
    return out;
}

struct matmul_case {
    const char *format;
    int threads;
};

class CpuQuantMatmul : public ::testing::TestWithParam<matmul_case> {};

// y must be exactly one_output(row, quantize_activations(x)) for every row and token (the device adds nothing of its
// own, and neither threads nor the token count change a bit), and close to the float64 product of the dequantized
// weights with the float activations.
TEST_P(CpuQuantMatmul, IntegerPathEqualsRowDotsAndApproximatesFloat64) {
    std::vector<strata::quants::kernel_set> sets = {strata::quants::kernel_set::scalar};
    if (strata::quants::cpu_has_avx2_fma()) sets.push_back(strata::quants::kernel_set::avx2_fma);
    device_ptr dev = make_device(GetParam().threads);
    ASSERT_NE(dev, nullptr);
    for (auto set : sets) {
        const strata_quant_desc *q = find_format(set, GetParam().format);
        ASSERT_NE(q, nullptr);
        ASSERT_TRUE(STRATA_HAS_SLOT(q, dot_act));
        // 40 tokens x 2048 columns need 100 KiB of quantized activations: more than the device preallocates, so the
        // scratch grows once here; the 20-token case crosses the 16-token blocking of the row loop.
        for (const auto &[rows, cols] : {std::pair<int64_t, int64_t>{67, 256}, {29, 2048}}) {
            const auto w = random_floats(static_cast<size_t>(rows * cols), 3);
            const quant_matrix m = quantize(*q, w, rows, cols);
            std::vector<float> deq(static_cast<size_t>(rows * cols));
            for (int64_t r = 0; r < rows; ++r)
                q->dequantize_row(m.bytes.data() + r * m.view.row_bytes, deq.data() + r * cols, cols);
            const int64_t act_row_bytes = cols / q->block_elems * q->act_block_bytes;
            std::vector<uint64_t> xq(static_cast<size_t>(act_row_bytes / 8 + 1)); // 8-byte aligned scratch

            for (int n_tokens : {1, 4, 9, 20, 40}) {
                const auto x = random_floats(static_cast<size_t>(n_tokens * cols), 4, -2.0f, 2.0f);
                std::vector<float> y(static_cast<size_t>(rows * n_tokens), NAN);
                strata_status st{};
                ASSERT_EQ(ops().matmul(dev.get(), &m.view, x.data(), n_tokens, y.data(), &st), STRATA_OK)
                    << st.message;
                std::vector<double> want(y.size());
                for (int t = 0; t < n_tokens; ++t) {
                    q->quantize_activations(x.data() + t * cols, xq.data(), cols);
                    for (int64_t r = 0; r < rows; ++r) {
                        ASSERT_EQ(y[t * rows + r], one_output(q, m.bytes.data() + r * m.view.row_bytes, xq.data(), cols))
                            << q->header.name << " row " << r << " token " << t << " of " << n_tokens;
                        double s = 0.0;
                        for (int64_t c = 0; c < cols; ++c) s += double{deq[r * cols + c]} * x[t * cols + c];
                        want[t * rows + r] = s;
                    }
                }
                // Activations quantized to 8 bits, as llama.cpp does: ~1% of the output's scale.
                EXPECT_LT(normwise_error(y, want), 2e-2)
                    << q->header.name << " " << strata::quants::kernel_set_name(set) << " " << n_tokens << " tokens";
            }
        }
    }
}

// Calls of the counting dot_act_multi and gemm_act below; each test resets them.
std::atomic<int> multi_calls{0}, gemm_calls{0};
const strata_quant_desc *counted_format = nullptr;
void counting_dot_act_multi(const void *row, const void *xq, int64_t stride, int32_t n_x, int64_t n, float *out) {
    ++multi_calls;
    counted_format->dot_act_multi(row, xq, stride, n_x, n, out);
}
void counting_gemm_act(const void *w, int64_t row_bytes, int64_t n_rows, const void *xq, int64_t stride, int32_t n_x,
                       int64_t n, float *out, int64_t out_stride) {
    ++gemm_calls;
    counted_format->gemm_act(w, row_bytes, n_rows, xq, stride, n_x, n, out, out_stride);
}

// matmul_id (ABI 1.16) on the integer path: each slot's row equals matmul's over its expert's rows, bit for bit,
// whether the slots have their own activations (x_per_slot) or share their token's, and whatever the descriptor's
// vintage: with gemm_act (1.22) each expert's rows go through it over all its slots, one token included, as matmul
// does; before 1.22, several slots per expert (prefill) go through dot_act_multi, one through dot_act.
TEST_P(CpuQuantMatmul, MatmulIdEqualsMatmulOverEachSelectedExpert) {
    std::vector<strata::quants::kernel_set> sets = {strata::quants::kernel_set::scalar};
    if (strata::quants::cpu_has_avx2_fma()) sets.push_back(strata::quants::kernel_set::avx2_fma);
    device_ptr dev = make_device(GetParam().threads);
    ASSERT_NE(dev, nullptr);
    for (auto set : sets) {
        counted_format = find_format(set, GetParam().format);
        ASSERT_NE(counted_format, nullptr);
        for (const bool before_gemm : {false, true}) {
        strata_quant_desc d = *counted_format;
        d.dot_act_multi = &counting_dot_act_multi;
        d.gemm_act = &counting_gemm_act;
        if (before_gemm)
            d.header.struct_size =
                static_cast<uint32_t>(offsetof(strata_quant_desc, find_nonfinite) + sizeof(d.find_nonfinite));
        const int32_t n_expert = 6, k = 3;
        const int64_t rpe = 11, cols = 256;
        const auto w = random_floats(static_cast<size_t>(n_expert * rpe * cols), 91);
        quant_matrix m = quantize(d, w, n_expert * rpe, cols);
        m.view.quant = &d;
        for (const int32_t n_tokens : {1, 9}) {
            for (const int32_t per_slot : {1, 0}) {
                multi_calls = 0;
                gemm_calls = 0;
                std::vector<int32_t> ids(static_cast<size_t>(n_tokens * k));
                for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 7 + i / k) % n_expert);
                const int64_t n_x = per_slot ? n_tokens * k : n_tokens;
                const auto x = random_floats(static_cast<size_t>(n_x * cols), 92, -2.0f, 2.0f);
                std::vector<float> y(static_cast<size_t>(n_tokens * k * rpe), NAN);
                strata_matmul_id_args a{};
                a.struct_size = sizeof a;
                a.w = &m.view;
                a.n_expert = n_expert;
                a.n_tokens = n_tokens;
                a.k = k;
                a.ids = ids.data();
                a.x = x.data();
                a.x_per_slot = per_slot;
                a.y = y.data();
                strata_status st{};
                ASSERT_EQ(ops().matmul_id(dev.get(), &a, &st), STRATA_OK) << st.message;
                EXPECT_EQ(multi_calls.load() > 0, before_gemm && n_tokens > 1)
                    << d.header.name << " " << n_tokens << " tokens, before 1.22: " << before_gemm;
                EXPECT_EQ(gemm_calls.load() > 0, !before_gemm) << d.header.name << " " << n_tokens << " tokens";
                for (int32_t slot = 0; slot < n_tokens * k; ++slot) {
                    strata_tensor_view expert = m.view;
                    expert.rows = rpe;
                    expert.data = m.bytes.data() + ids[static_cast<size_t>(slot)] * rpe * m.view.row_bytes;
                    std::vector<float> want(static_cast<size_t>(rpe));
                    ASSERT_EQ(ops().matmul(dev.get(), &expert, x.data() + (per_slot ? slot : slot / k) * cols, 1,
                                           want.data(), &st),
                              STRATA_OK);
                    for (int64_t i = 0; i < rpe; ++i)
                        ASSERT_EQ(y[slot * rpe + i], want[i]) << d.header.name << " slot " << slot << " row " << i
                                                              << " per_slot " << per_slot;
                }
            }
        }
        }
    }
}

// A quant descriptor built against ABI 1.0 (struct_size ends at kernel_name) has no integer path: the device must
// use dot_f32 and never read the slots past the struct's end.
TEST_P(CpuQuantMatmul, OlderDescriptorUsesTheFloatPath) {
    device_ptr dev = make_device(GetParam().threads);
    ASSERT_NE(dev, nullptr);
    strata_quant_desc old = *find_format(strata::quants::kernel_set::scalar, GetParam().format);
    old.header.struct_size = static_cast<uint32_t>(offsetof(strata_quant_desc, kernel_name) + sizeof(old.kernel_name));
    old.dot_act = nullptr; // would crash if called anyway
    const int64_t rows = 33, cols = 512;
    quant_matrix m = quantize(old, random_floats(static_cast<size_t>(rows * cols), 8), rows, cols);
    m.view.quant = &old;
    const int n_tokens = 3;
    const auto x = random_floats(static_cast<size_t>(n_tokens * cols), 9);
    std::vector<float> y(static_cast<size_t>(rows * n_tokens), NAN);
    strata_status st{};
    ASSERT_EQ(ops().matmul(dev.get(), &m.view, x.data(), n_tokens, y.data(), &st), STRATA_OK) << st.message;
    for (int t = 0; t < n_tokens; ++t)
        for (int64_t r = 0; r < rows; ++r)
            ASSERT_EQ(y[t * rows + r], old.dot_f32(m.bytes.data() + r * m.view.row_bytes, x.data() + t * cols, cols));
}

// Which kernel the device calls, by descriptor vintage: with gemm_act (ABI 1.22) every matmul goes through it, one
// token included, and every output is gemm_act's one-output bits; before 1.22 several tokens take the multi-token
// kernel (ABI 1.2) and one token dot_act; before 1.2 dot_act only — and then every output is dot_act's, bit for bit.
TEST_P(CpuQuantMatmul, EachDescriptorVintageGetsItsKernels) {
    std::vector<strata::quants::kernel_set> sets = {strata::quants::kernel_set::scalar};
    if (strata::quants::cpu_has_avx2_fma()) sets.push_back(strata::quants::kernel_set::avx2_fma);
    device_ptr dev = make_device(GetParam().threads);
    ASSERT_NE(dev, nullptr);
    enum vintage { abi_1_22, abi_1_21, abi_1_1 };
    for (auto set : sets) {
        counted_format = find_format(set, GetParam().format);
        ASSERT_NE(counted_format, nullptr);
        for (vintage v : {abi_1_22, abi_1_21, abi_1_1}) {
            strata_quant_desc d = *counted_format;
            d.dot_act_multi = &counting_dot_act_multi;
            d.gemm_act = &counting_gemm_act;
            if (v == abi_1_21)
                d.header.struct_size =
                    static_cast<uint32_t>(offsetof(strata_quant_desc, find_nonfinite) + sizeof(d.find_nonfinite));
            if (v == abi_1_1)
                d.header.struct_size = static_cast<uint32_t>(offsetof(strata_quant_desc, dot_act) + sizeof(d.dot_act));
            const int64_t rows = 37, cols = 320;
            quant_matrix m = quantize(d, random_floats(static_cast<size_t>(rows * cols), 11), rows, cols);
            m.view.quant = &d;
            std::vector<uint64_t> xq(static_cast<size_t>(cols / 32 * d.act_block_bytes / 8 + 1));
            for (int n_tokens : {1, 2, 7, 17, 33, 70}) {
                multi_calls = 0;
                gemm_calls = 0;
                const auto x = random_floats(static_cast<size_t>(n_tokens * cols), 12, -3.0f, 3.0f);
                std::vector<float> y(static_cast<size_t>(rows * n_tokens), NAN);
                strata_status st{};
                ASSERT_EQ(ops().matmul(dev.get(), &m.view, x.data(), n_tokens, y.data(), &st), STRATA_OK)
                    << st.message;
                EXPECT_EQ(gemm_calls.load() > 0, v == abi_1_22) << d.header.name << " vintage " << v;
                EXPECT_EQ(multi_calls.load() > 0, v == abi_1_21 && n_tokens > 1)
                    << d.header.name << " vintage " << v << " tokens " << n_tokens;
                for (int t = 0; t < n_tokens; ++t) {
                    d.quantize_activations(x.data() + t * cols, xq.data(), cols);
                    for (int64_t r = 0; r < rows; ++r) {
                        const unsigned char *row = m.bytes.data() + r * m.view.row_bytes;
                        const float want =
                            v == abi_1_22 ? one_output(counted_format, row, xq.data(), cols) : d.dot_act(row, xq.data(), cols);
                        ASSERT_EQ(y[t * rows + r], want)
                            << d.header.name << " vintage " << v << " row " << r << " token " << t << " of " << n_tokens;
                    }
                }
            }
        }
    }
}

TEST_P(CpuQuantMatmul, EmbeddingDequantizesRows) {
    device_ptr dev = make_device(GetParam().threads);
    const strata_quant_desc *q = find_format(strata::quants::kernel_set::scalar, GetParam().format);
    ASSERT_NE(q, nullptr);
    const int64_t vocab = 20, dim = 64;
    const quant_matrix m = quantize(*q, random_floats(static_cast<size_t>(vocab * dim), 5), vocab, dim);
    const int32_t tokens[3] = {19, 0, 7};
    std::vector<float> out(3 * dim), want(dim);
    strata_status st{};
    ASSERT_EQ(ops().embedding(dev.get(), &m.view, tokens, 3, out.data(), &st), STRATA_OK) << st.message;
    for (int t = 0; t < 3; ++t) {
        q->dequantize_row(m.bytes.data() + tokens[t] * m.view.row_bytes, want.data(), dim);
        EXPECT_TRUE(std::equal(want.begin(), want.end(), out.begin() + t * dim)) << "token " << tokens[t];
    }
}

// ABI 1.19: a weight whose columns meet the activations in an input order (GPTQ act-order) gives, bit for bit, the
// matmul of the same rows with each token's activations permuted by hand (x'[j] = x[order[j]]): the integer path
// then quantizes the gathered activations, as it would x'. Only matmul takes an input order: embedding, matmul_id
// and `supports` for a 3-D (experts) view refuse it; an order entry outside the columns is an error; a view built
// before 1.19 (struct_size short of the field) has none.
TEST_P(CpuQuantMatmul, AnInputOrderGathersTheActivationsBeforeTheRowsAreDotted) {
    device_ptr dev = make_device(GetParam().threads);
    ASSERT_NE(dev, nullptr);
    const strata_quant_desc *q = find_format(strata::quants::kernel_set::scalar, GetParam().format);
    ASSERT_NE(q, nullptr);
    const int64_t rows = 23, cols = 256;
    quant_matrix m = quantize(*q, random_floats(static_cast<size_t>(rows * cols), 31), rows, cols);
    std::vector<int32_t> order(static_cast<size_t>(cols));
    for (int64_t j = 0; j < cols; ++j) order[static_cast<size_t>(j)] = static_cast<int32_t>((37 * j + 5) % cols);
    strata_tensor_view ordered = m.view;
    ordered.input_order = order.data();
    for (int n_tokens : {1, 5, 20}) {
        const auto x = random_floats(static_cast<size_t>(n_tokens * cols), 32, -2.0f, 2.0f);
        std::vector<float> permuted(x.size());
        for (int t = 0; t < n_tokens; ++t)
            for (int64_t j = 0; j < cols; ++j) permuted[t * cols + j] = x[t * cols + order[static_cast<size_t>(j)]];
        std::vector<float> y(static_cast<size_t>(rows * n_tokens), NAN), want(y.size(), NAN);
        strata_status st{};
        ASSERT_EQ(ops().matmul(dev.get(), &ordered, x.data(), n_tokens, y.data(), &st), STRATA_OK) << st.message;
        ASSERT_EQ(ops().matmul(dev.get(), &m.view, permuted.data(), n_tokens, want.data(), &st), STRATA_OK);
        EXPECT_EQ(y, want) << n_tokens << " tokens";
    }
    strata_status st{};
    std::vector<float> out(static_cast<size_t>(rows * 4));
    const int32_t tokens[2] = {1, 2};
    EXPECT_EQ(ops().embedding(dev.get(), &ordered, tokens, 2, out.data(), &st), STRATA_ERR_UNSUPPORTED);
    EXPECT_NE(std::string(st.message).find("only matmul takes one"), std::string::npos) << st.message;
    strata_tensor_view experts = ordered;
    experts.rows = rows - 1; // 11 rows of 2 experts
    experts.n_dims = 3;
    experts.ne[0] = cols, experts.ne[1] = 11, experts.ne[2] = 2, experts.ne[3] = 1;
    strata_support_query sq{};
    sq.struct_size = sizeof sq;
    sq.kind = STRATA_SUPPORT_WEIGHT;
    sq.weight = &ordered;
    char why[256] = {0};
    EXPECT_EQ(ops().supports(dev.get(), &sq, why, sizeof why), 1) << why;
    sq.weight = &experts;
    EXPECT_EQ(ops().supports(dev.get(), &sq, why, sizeof why), 0);
    EXPECT_NE(std::string(why).find("matmul_id"), std::string::npos) << why;
    const auto x = random_floats(static_cast<size_t>(cols), 33);
    order[7] = static_cast<int32_t>(cols);
    EXPECT_EQ(ops().matmul(dev.get(), &ordered, x.data(), 1, out.data(), &st), STRATA_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(st.message).find("input_order[7] = 256 is outside [0, 256)"), std::string::npos)
        << st.message;
    strata_tensor_view old = ordered; // a host or model plugin built before 1.19: the field is past its view
    old.struct_size = static_cast<uint32_t>(offsetof(strata_tensor_view, input_order));
    std::vector<float> plain(static_cast<size_t>(rows)), unordered(static_cast<size_t>(rows));
    ASSERT_EQ(ops().matmul(dev.get(), &old, x.data(), 1, plain.data(), &st), STRATA_OK) << st.message;
    ASSERT_EQ(ops().matmul(dev.get(), &m.view, x.data(), 1, unordered.data(), &st), STRATA_OK);
    EXPECT_EQ(plain, unordered);
}

INSTANTIATE_TEST_SUITE_P(FormatsAndThreads, CpuQuantMatmul,
                         ::testing::Values(matmul_case{"q8_0", 1}, matmul_case{"q8_0", 3}, matmul_case{"q4_0", 1},
                                           matmul_case{"q4_0", 3}),
                         [](const ::testing::TestParamInfo<matmul_case> &info) {
                             return std::string(info.param.format) + "_" + std::to_string(info.param.threads) +
                                    "threads";
                         });

} // namespace
