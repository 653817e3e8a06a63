// Matmul and embedding on the GPU over every weight format, against a float64 product of the format's reference
// dequantization and against the CPU device.
//
// Bounds (normwise: max |error| / max |reference|):
//  - GPU vs float64 reference: < 1e-4 for every format. The kernels decode weights exactly and multiply with the
//    float activations in float, so only float summation error remains.
//  - GPU vs CPU device: < 1e-4 for F32/F16/BF16 (both compute in float). For Q8_0/Q4_0 the CPU device quantizes
//    the activations to 8 bits first (llama.cpp's integer path) and the GPU does not, so they differ by the CPU's
//    activation-quantization error: the bound is 2e-2 (the CPU device measured 3.5e-3 to 4.1e-3 against float64
//    on these shapes and seeds).
#include "cuda_test_support.hpp"

#include <cinttypes>

namespace {

using namespace cuda_test;

struct format_case {
    const char *name;
    uint32_t ggml_type;
    double vs_cpu_bound;
};

void PrintTo(const format_case &c, std::ostream *os) { *os << c.name; }

class CudaMatmul : public ::testing::TestWithParam<format_case> {};

TEST_P(CudaMatmul, MatchesFloat64AndTheCpuDevice) {
    REQUIRE_GPU();
    const format_case &c = GetParam();
    plugins &p = loaded();
    const strata_quant_desc *q = p.quant(c.ggml_type);
    ASSERT_NE(q, nullptr);
    strata_status st{};
    device_ptr gpu = create_device(p.cuda, &st);
    ASSERT_NE(gpu, nullptr) << st.message;
    device_ptr cpu = create_device(p.cpu, &st);
    ASSERT_NE(cpu, nullptr) << st.message;

    // Row counts off the 4-row and 64-row tiles; 100 columns (F32/F16/BF16 only) leave a partial 32-column step.
    std::vector<std::pair<int64_t, int64_t>> shapes = {{67, 256}, {130, 2048}};
    if (q->block_elems <= 32) shapes.push_back({1, 64});
    if (q->block_elems == 1) shapes.push_back({45, 100});
    for (const auto &[rows, cols] : shapes) {
        const quantized_matrix m = quantize(*q, random_floats(static_cast<size_t>(rows * cols), 11), rows, cols);
        auto w_dev = to_device(gpu.get(), m.bytes);
        const strata_tensor_view w_gpu = view_of(*q, m, w_dev->get());
        const strata_tensor_view w_cpu = view_of(*q, m, m.bytes.data());
        // 1 and 8 run the one-warp-per-row kernel, 3 a partial batch of it, 9/70 the tiled kernel (70: two token
        // tiles, the second partial).
        for (int32_t n_tokens : {1, 3, 8, 9, 70}) {
            SCOPED_TRACE(testing::Message() << rows << "x" << cols << ", " << n_tokens << " tokens");
            const auto x = random_floats(static_cast<size_t>(n_tokens * cols), 12, -2.0f, 2.0f);
            auto x_dev = to_device(gpu.get(), x);
            device_buffer y_dev(gpu.get(), sizeof(float) * static_cast<size_t>(rows * n_tokens));
            ASSERT_EQ(p.cuda->matmul(gpu.get(), &w_gpu, x_dev->f(), n_tokens, y_dev.f(), &st), STRATA_OK)
                << st.message;
            const auto y_gpu = floats_from(gpu.get(), y_dev.get(), static_cast<size_t>(rows * n_tokens));
            std::vector<float> y_cpu(y_gpu.size(), NAN);
            ASSERT_EQ(p.cpu->matmul(cpu.get(), &w_cpu, x.data(), n_tokens, y_cpu.data(), &st), STRATA_OK)
                << st.message;
            const auto want = reference_product(m.dequantized, x, rows, cols, n_tokens);
            const double vs_ref = normwise_error(y_gpu, want);
            const double cpu_vs_ref = normwise_error(y_cpu, want);
            std::vector<double> cpu_as_ref(y_cpu.begin(), y_cpu.end());
            const double vs_cpu = normwise_error(y_gpu, cpu_as_ref);
            EXPECT_LT(vs_ref, 1e-4);
            EXPECT_LT(vs_cpu, c.vs_cpu_bound) << "cpu vs float64: " << cpu_vs_ref;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Formats, CudaMatmul,
                         ::testing::Values(format_case{"F32", 0, 1e-4}, format_case{"F16", 1, 1e-4},
                                           format_case{"BF16", 30, 1e-4}, format_case{"Q8_0", 8, 2e-2},
                                           format_case{"Q4_0", 2, 2e-2}, format_case{"Q4_1", 3, 2e-2},
                                           format_case{"Q5_0", 6, 2e-2}, format_case{"Q5_1", 7, 2e-2},
                                           format_case{"IQ4_NL", 20, 2e-2}, format_case{"Q2_K", 10, 2e-2},
                                           format_case{"Q3_K", 11, 2e-2}, format_case{"Q4_K", 12, 2e-2},
                                           format_case{"Q5_K", 13, 2e-2}, format_case{"Q6_K", 14, 2e-2},
                                           format_case{"IQ4_XS", 23, 2e-2}),
                         [](const testing::TestParamInfo<format_case> &i) { return std::string(i.param.name); });

class CudaEmbedding : public ::testing::TestWithParam<format_case> {};

// Rows are decoded exactly, so the GPU's rows equal the reference dequantization and the CPU device's bit for bit.
TEST_P(CudaEmbedding, RowsEqualTheReferenceAndTheCpuDevice) {
    REQUIRE_GPU();
    plugins &p = loaded();
    const strata_quant_desc *q = p.quant(GetParam().ggml_type);
    ASSERT_NE(q, nullptr);
    strata_status st{};
    device_ptr gpu = create_device(p.cuda, &st);
    ASSERT_NE(gpu, nullptr) << st.message;
    device_ptr cpu = create_device(p.cpu, &st);
    ASSERT_NE(cpu, nullptr) << st.message;

    const int64_t rows = 50, cols = 256;
    const quantized_matrix m = quantize(*q, random_floats(static_cast<size_t>(rows * cols), 21, -4.0f, 4.0f), rows, cols);
    auto table_dev = to_device(gpu.get(), m.bytes);
    const strata_tensor_view table_gpu = view_of(*q, m, table_dev->get());
    const strata_tensor_view table_cpu = view_of(*q, m, m.bytes.data());
    const std::vector<int32_t> tokens = {3, 0, 49, 3, 17};
    const auto n = static_cast<int32_t>(tokens.size());
    device_buffer out_dev(gpu.get(), sizeof(float) * static_cast<size_t>(n * cols));
    ASSERT_EQ(p.cuda->embedding(gpu.get(), &table_gpu, tokens.data(), n, out_dev.f(), &st), STRATA_OK) << st.message;
    const auto got = floats_from(gpu.get(), out_dev.get(), static_cast<size_t>(n * cols));
    std::vector<float> cpu_out(got.size(), NAN);
    ASSERT_EQ(p.cpu->embedding(cpu.get(), &table_cpu, tokens.data(), n, cpu_out.data(), &st), STRATA_OK) << st.message;
    for (int32_t t = 0; t < n; ++t)
        for (int64_t k = 0; k < cols; ++k) {
            const size_t i = static_cast<size_t>(t * cols + k);
            ASSERT_EQ(got[i], m.dequantized[static_cast<size_t>(tokens[static_cast<size_t>(t)] * cols + k)])
                << "token " << t << " col " << k;
            ASSERT_EQ(got[i], cpu_out[i]);
        }

    // An id outside the table is refused before anything is enqueued: the output keeps its bytes.
    const std::vector<int32_t> bad = {1, 50};
    EXPECT_EQ(p.cuda->embedding(gpu.get(), &table_gpu, bad.data(), 2, out_dev.f(), &st), STRATA_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::strstr(st.message, "outside the vocabulary"), nullptr) << st.message;
    EXPECT_EQ(floats_from(gpu.get(), out_dev.get(), got.size()), got);
}

INSTANTIATE_TEST_SUITE_P(Formats, CudaEmbedding,
                         ::testing::Values(format_case{"F32", 0, 0}, format_case{"F16", 1, 0},
                                           format_case{"BF16", 30, 0}, format_case{"Q8_0", 8, 0},
                                           format_case{"Q4_0", 2, 0}, format_case{"Q4_1", 3, 0},
                                           format_case{"Q5_0", 6, 0}, format_case{"Q5_1", 7, 0},
                                           format_case{"IQ4_NL", 20, 0}, format_case{"Q2_K", 10, 0},
                                           format_case{"Q3_K", 11, 0}, format_case{"Q4_K", 12, 0},
                                           format_case{"Q5_K", 13, 0}, format_case{"Q6_K", 14, 0},
                                           format_case{"IQ4_XS", 23, 0}),
                         [](const testing::TestParamInfo<format_case> &i) { return std::string(i.param.name); });

// Weights the kernels cannot read are refused with a reason, not computed on.
TEST(CudaMatmulArguments, UnsupportedTypesAndMisalignedRowsAreRefused) {
    REQUIRE_GPU();
    plugins &p = loaded();
    strata_status st{};
    device_ptr gpu = create_device(p.cuda, &st);
    ASSERT_NE(gpu, nullptr) << st.message;
    device_buffer w(gpu.get(), 4096), x(gpu.get(), 4096), y(gpu.get(), 4096);

    strata_tensor_view v{};
    v.struct_size = sizeof v;
    v.ggml_type = 16; // IQ2_XXS: not one of this device's formats
    v.data = w.get();
    v.rows = 2;
    v.cols = 256;
    v.row_bytes = 66;
    v.name = "blk.0.iq2xxs";
    EXPECT_EQ(p.cuda->matmul(gpu.get(), &v, x.f(), 1, y.f(), &st), STRATA_ERR_UNSUPPORTED);
    EXPECT_NE(std::strstr(st.message, "ggml type 16"), nullptr) << st.message;

    v.ggml_type = 0;
    v.cols = 8;
    v.row_bytes = 34; // F32 rows 34 bytes apart: the second row is not float-aligned
    EXPECT_EQ(p.cuda->matmul(gpu.get(), &v, x.f(), 1, y.f(), &st), STRATA_ERR_UNSUPPORTED);
    EXPECT_NE(std::strstr(st.message, "aligned"), nullptr) << st.message;

    v.row_bytes = 16; // 8 F32 columns need 32 bytes
    EXPECT_EQ(p.cuda->matmul(gpu.get(), &v, x.f(), 1, y.f(), &st), STRATA_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::strstr(st.message, "row_bytes"), nullptr) << st.message;

    v.ggml_type = 8; // Q8_0 with 40 columns: not whole blocks
    v.cols = 40;
    v.row_bytes = 68;
    EXPECT_EQ(p.cuda->matmul(gpu.get(), &v, x.f(), 1, y.f(), &st), STRATA_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::strstr(st.message, "block size"), nullptr) << st.message;
}

// ABI 1.19 on the GPU: a GPTQ act-order weight (Q4_G32) with its input order in device memory gives, bit for bit,
// the matmul of the same rows with the activations permuted by hand, at decode and prefill batch sizes.
TEST(CudaMatmulInputOrder, GathersTheActivationsIntoTheWeightsOrder) {
    REQUIRE_GPU();
    plugins &p = loaded();
    const strata_quant_desc *q = p.quant(STRATA_TYPE_Q4_G32);
    ASSERT_NE(q, nullptr);
    strata_status st{};
    device_ptr gpu = create_device(p.cuda, &st);
    ASSERT_NE(gpu, nullptr) << st.message;
    const int64_t rows = 67, cols = 512;
    const quantized_matrix m = quantize(*q, random_floats(static_cast<size_t>(rows * cols), 41), rows, cols);
    auto w_dev = to_device(gpu.get(), m.bytes);
    std::vector<int32_t> order(static_cast<size_t>(cols));
    for (int64_t j = 0; j < cols; ++j) order[static_cast<size_t>(j)] = static_cast<int32_t>((97 * j + 3) % cols);
    auto order_dev = to_device(gpu.get(), order);
    const strata_tensor_view plain = view_of(*q, m, w_dev->get());
    strata_tensor_view ordered = plain;
    ordered.input_order = static_cast<const int32_t *>(order_dev->get());
    for (int32_t n_tokens : {1, 9, 70}) {
        SCOPED_TRACE(testing::Message() << n_tokens << " tokens");
        const auto x = random_floats(static_cast<size_t>(n_tokens * cols), 42, -2.0f, 2.0f);
        std::vector<float> permuted(x.size());
        for (int32_t t = 0; t < n_tokens; ++t)
            for (int64_t j = 0; j < cols; ++j) permuted[t * cols + j] = x[t * cols + order[static_cast<size_t>(j)]];
        auto x_dev = to_device(gpu.get(), x);
        auto permuted_dev = to_device(gpu.get(), permuted);
        device_buffer y_dev(gpu.get(), sizeof(float) * static_cast<size_t>(rows * n_tokens));
        device_buffer want_dev(gpu.get(), sizeof(float) * static_cast<size_t>(rows * n_tokens));
        ASSERT_EQ(p.cuda->matmul(gpu.get(), &ordered, x_dev->f(), n_tokens, y_dev.f(), &st), STRATA_OK) << st.message;
        ASSERT_EQ(p.cuda->matmul(gpu.get(), &plain, permuted_dev->f(), n_tokens, want_dev.f(), &st), STRATA_OK)
            << st.message;
        EXPECT_EQ(floats_from(gpu.get(), y_dev.get(), static_cast<size_t>(rows * n_tokens)),
                  floats_from(gpu.get(), want_dev.get(), static_cast<size_t>(rows * n_tokens)));
    }
    const int32_t tokens[1] = {0};
    device_buffer out(gpu.get(), sizeof(float) * static_cast<size_t>(cols));
    EXPECT_EQ(p.cuda->embedding(gpu.get(), &ordered, tokens, 1, out.f(), &st), STRATA_ERR_UNSUPPORTED);
    EXPECT_NE(std::string(st.message).find("only matmul takes one"), std::string::npos) << st.message;
}

} // namespace
