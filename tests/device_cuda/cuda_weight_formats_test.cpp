// The kernels' element decoders (plugins/device/cuda/weight_formats.hpp) compiled for the host: they must give the
// quant plugin's reference dequantize_row bit for bit. Runs on every machine; on a GPU the same source is what the
// kernels run, which the matmul and embedding tests then check end to end.
#include "cuda_test_support.hpp"

#include "weight_formats.hpp"

namespace {

using namespace cuda_test;
namespace fmt = strata::cuda;

uint32_t bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}

template <uint32_t T> void expect_rows_decode_exactly(uint32_t seed) {
    const strata_quant_desc *q = loaded().quant(T);
    ASSERT_NE(q, nullptr) << "the ggml quant plugin has no format " << T << ": " << loaded().load_error;
    const int64_t rows = 7, cols = 512;
    // Wide range with some exact zeros, so scales, signs and the Q4_0 nibble ends are all exercised.
    std::vector<float> w = random_floats(static_cast<size_t>(rows * cols), seed, -3.0f, 3.0f);
    for (size_t i = 0; i < w.size(); i += 37) w[i] = 0.0f;
    for (int64_t k = 0; k < cols; ++k) w[static_cast<size_t>(cols + k)] = 1e-6f * static_cast<float>(k); // tiny row
    const quantized_matrix m = quantize(*q, w, rows, cols);
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t k = 0; k < cols; ++k) {
            const float got = fmt::format<T>::element(m.bytes.data() + r * m.row_bytes, k);
            const float want = m.dequantized[static_cast<size_t>(r * cols + k)];
            ASSERT_EQ(bits(got), bits(want)) << "type " << T << " row " << r << " col " << k << ": " << got
                                             << " != " << want;
        }
    // The wide-load decoder the decode kernel uses: eight elements at a time.
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t k = 0; k < cols; k += 8) {
            float got[8];
            fmt::format<T>::load8(m.bytes.data() + r * m.row_bytes, k, got);
            for (int i = 0; i < 8; ++i)
                ASSERT_EQ(bits(got[i]), bits(m.dequantized[static_cast<size_t>(r * cols + k + i)]))
                    << "load8, type " << T << " row " << r << " col " << k + i;
        }
}

TEST(CudaWeightFormats, F32DecodesLikeTheQuantPlugin) { expect_rows_decode_exactly<fmt::weight_f32>(1); }
TEST(CudaWeightFormats, F16DecodesLikeTheQuantPlugin) { expect_rows_decode_exactly<fmt::weight_f16>(2); }
TEST(CudaWeightFormats, BF16DecodesLikeTheQuantPlugin) { expect_rows_decode_exactly<fmt::weight_bf16>(3); }
TEST(CudaWeightFormats, Q8_0DecodesLikeTheQuantPlugin) { expect_rows_decode_exactly<fmt::weight_q8_0>(4); }
TEST(CudaWeightFormats, Q4_0DecodesLikeTheQuantPlugin) { expect_rows_decode_exactly<fmt::weight_q4_0>(5); }
TEST(CudaWeightFormats, Q4_1DecodesLikeTheQuantPlugin) { expect_rows_decode_exactly<fmt::weight_q4_1>(6); }
TEST(CudaWeightFormats, Q5_0DecodesLikeTheQuantPlugin) { expect_rows_decode_exactly<fmt::weight_q5_0>(7); }
TEST(CudaWeightFormats, Q5_1DecodesLikeTheQuantPlugin) { expect_rows_decode_exactly<fmt::weight_q5_1>(8); }
TEST(CudaWeightFormats, IQ4_NLDecodesLikeTheQuantPlugin) { expect_rows_decode_exactly<fmt::weight_iq4_nl>(9); }
TEST(CudaWeightFormats, Q2_KDecodesLikeTheQuantPlugin) { expect_rows_decode_exactly<fmt::weight_q2_k>(10); }
TEST(CudaWeightFormats, Q3_KDecodesLikeTheQuantPlugin) { expect_rows_decode_exactly<fmt::weight_q3_k>(11); }
TEST(CudaWeightFormats, Q4_KDecodesLikeTheQuantPlugin) { expect_rows_decode_exactly<fmt::weight_q4_k>(12); }
TEST(CudaWeightFormats, Q5_KDecodesLikeTheQuantPlugin) { expect_rows_decode_exactly<fmt::weight_q5_k>(13); }
TEST(CudaWeightFormats, Q6_KDecodesLikeTheQuantPlugin) { expect_rows_decode_exactly<fmt::weight_q6_k>(14); }
TEST(CudaWeightFormats, IQ4_XSDecodesLikeTheQuantPlugin) { expect_rows_decode_exactly<fmt::weight_iq4_xs>(15); }
// The group-integer formats (repacked GPTQ / AWQ weights, the group_int quant plugin).
TEST(CudaWeightFormats, GroupIntFormatsDecodeLikeTheQuantPlugin) {
    expect_rows_decode_exactly<fmt::weight_q4_g32>(16);
    expect_rows_decode_exactly<fmt::weight_q4_g64>(17);
    expect_rows_decode_exactly<fmt::weight_q4_g128>(18);
    expect_rows_decode_exactly<fmt::weight_q8_g32>(19);
    expect_rows_decode_exactly<fmt::weight_q8_g64>(20);
    expect_rows_decode_exactly<fmt::weight_q8_g128>(21);
}

// The FP8 formats (repacked compressed-tensors / fp8 weights, the fp8 quant plugin).
TEST(CudaWeightFormats, Fp8FormatsDecodeLikeTheQuantPlugin) {
    expect_rows_decode_exactly<fmt::weight_f8_e4m3_b32>(22);
    expect_rows_decode_exactly<fmt::weight_f8_e4m3_b128>(23);
}

// Random bytes (any scale bits, every nibble and fifth bit) decode like the reference dequantizer too, for the
// formats whose decode is a chain of float operations.
template <uint32_t T> void expect_random_bytes_decode_exactly(uint32_t seed) {
    const strata_quant_desc *q = loaded().quant(T);
    ASSERT_NE(q, nullptr) << loaded().load_error;
    const int64_t cols = 1024;
    const int64_t row_bytes = cols / q->block_elems * q->block_bytes;
    std::vector<unsigned char> bytes(static_cast<size_t>(row_bytes));
    uint32_t state = seed * 2654435761u + 1;
    for (auto &b : bytes) {
        state = state * 1664525u + 1013904223u;
        b = static_cast<unsigned char>(state >> 24);
    }
    std::vector<float> want(static_cast<size_t>(cols));
    q->dequantize_row(bytes.data(), want.data(), cols);
    for (int64_t k = 0; k < cols; ++k) {
        const float got = fmt::format<T>::element(bytes.data(), k);
        const float w = want[static_cast<size_t>(k)];
        ASSERT_TRUE(bits(got) == bits(w) || (got != got && w != w)) << "type " << T << " col " << k;
    }
}

TEST(CudaWeightFormats, RandomBytesDecodeLikeTheQuantPlugin) {
    uint32_t seed = 1;
    for (const uint32_t t : {fmt::weight_q4_1, fmt::weight_q5_0, fmt::weight_q5_1, fmt::weight_iq4_nl, fmt::weight_q2_k,
                             fmt::weight_q3_k, fmt::weight_q4_k, fmt::weight_q5_k, fmt::weight_q6_k, fmt::weight_iq4_xs,
                             fmt::weight_q4_g32, fmt::weight_q4_g128, fmt::weight_q8_g64, fmt::weight_f8_e4m3_b32,
                             fmt::weight_f8_e4m3_b128}) {
        SCOPED_TRACE(testing::Message() << "type " << t);
        switch (t) {
#define STRATA_RANDOM_CASE(x)                                                                                          \
    case fmt::x: expect_random_bytes_decode_exactly<fmt::x>(seed++); break;
            STRATA_CUDA_WEIGHT_TYPES(STRATA_RANDOM_CASE)
#undef STRATA_RANDOM_CASE
        default: FAIL();
        }
    }
}

// Every binary16 and bfloat16 bit pattern (subnormals, infinities, NaN payloads) widens as the quant plugin's does.
TEST(CudaWeightFormats, EveryHalfAndBf16PatternWidensExactly) {
    const strata_quant_desc *f16 = loaded().quant(fmt::weight_f16);
    const strata_quant_desc *bf16 = loaded().quant(fmt::weight_bf16);
    ASSERT_NE(f16, nullptr);
    ASSERT_NE(bf16, nullptr);
    std::vector<uint16_t> all(65536);
    for (uint32_t i = 0; i < 65536; ++i) all[i] = static_cast<uint16_t>(i);
    std::vector<float> want_f16(65536), want_bf16(65536);
    f16->dequantize_row(all.data(), want_f16.data(), 65536);
    bf16->dequantize_row(all.data(), want_bf16.data(), 65536);
    for (uint32_t i = 0; i < 65536; ++i) {
        ASSERT_EQ(bits(fmt::half_to_float(all[i])), bits(want_f16[i])) << "binary16 0x" << std::hex << i;
        ASSERT_EQ(bits(fmt::bf16_to_float(all[i])), bits(want_bf16[i])) << "bfloat16 0x" << std::hex << i;
    }
}

} // namespace
