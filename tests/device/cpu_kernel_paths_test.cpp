// The AVX2+FMA kernel set against the scalar one: same results within 1e-6 relative, on every op that uses them;
// and an elementwise op gives an element the same bits wherever it sits in the array (batch invariance).
#include "cpu_attention_kernel.hpp"
#include "cpu_kernels.hpp"
#include "cpu_test_support.hpp"

#include <strata/cpu_features.hpp>
#include <strata/float16.hpp>
#include <strata/float8.hpp>

#include <cmath>
#include <limits>

namespace {

using namespace cpu_test;

constexpr double paths_tolerance = 1e-6;

// FP8 codes of the given floats (finite codes only: the formats saturate, and NaN codes have their own tests, since
// a NaN's payload through an FMA depends on the instruction's operand order).
std::vector<uint8_t> fp8_codes(const std::vector<float> &x, bool e4m3) {
    std::vector<uint8_t> codes(x.size());
    for (size_t i = 0; i < x.size(); ++i)
        codes[i] = e4m3 ? strata::float8::fp32_to_e4m3(x[i]) : strata::float8::fp32_to_e5m2(x[i]);
    return codes;
}

// q8_0 groups of the given floats (x.size() a multiple of 32).
std::vector<strata::kv_q8_0::group> q8_0_groups(const std::vector<float> &x) {
    std::vector<strata::kv_q8_0::group> groups(x.size() / 32);
    for (size_t g = 0; g < groups.size(); ++g) strata::kv_q8_0::quantize(x.data() + 32 * g, &groups[g]);
    return groups;
}

// Every kernel set this build has and this CPU runs: scalar, AVX2, AVX-512 (the CPU asked before avx512_kernels(),
// which runs AVX-512 instructions).
std::vector<const strata::cpu::kernels *> runnable_kernel_sets() {
    std::vector<const strata::cpu::kernels *> sets{&strata::cpu::scalar_kernels()};
    if (strata::cpu::avx2_kernels() == nullptr || !strata::plugin::cpu_has_avx2_fma_f16c()) return sets;
    sets.push_back(strata::cpu::avx2_kernels());
    if (strata::plugin::cpu_has_avx512_f_vl() && strata::cpu::avx512_kernels() != nullptr)
        sets.push_back(strata::cpu::avx512_kernels());
    return sets;
}

class CpuKernelPaths : public ::testing::Test {
  protected:
    void SetUp() override {
        scalar_ = make_device(2, /*force_scalar=*/true);
        fast_ = make_device(2, /*force_scalar=*/false);
        ASSERT_NE(scalar_, nullptr);
        ASSERT_NE(fast_, nullptr);
        ASSERT_STREQ(strata_cpu_device_kernel_name(scalar_.get()), "scalar");
        if (std::strcmp(strata_cpu_device_kernel_name(fast_.get()), "scalar") == 0)
            GTEST_SKIP() << "this CPU or build has no AVX2+FMA kernels";
    }
    device_ptr scalar_, fast_;
    strata_status st_{};
};

TEST(CpuKernelSelection, ForceScalarEnvironmentVariableSelectsScalar) {
    EXPECT_STREQ(strata_cpu_device_kernel_name(make_device(1, true).get()), "scalar");
    const std::string name = strata_cpu_device_kernel_name(make_device(1, false).get());
    // The widest set the CPU runs (the AVX2 one where STRATA_NO_AVX512 is set).
    const auto sets = runnable_kernel_sets();
    EXPECT_EQ(name, strata::plugin::avx512_disabled_by_environment() && sets.size() == 3 ? sets[1]->name
                                                                                          : sets.back()->name);
}

// STRATA_NO_AVX512 keeps a CPU with AVX-512 on the AVX2 set (what a CPU without it runs).
TEST(CpuKernelSelection, NoAvx512EnvironmentVariableSelectsTheAvx2Set) {
    if (runnable_kernel_sets().size() < 3) GTEST_SKIP() << "this CPU or build has no AVX-512 kernel set";
    const char *was = std::getenv("STRATA_NO_AVX512");
    const std::string saved = was != nullptr ? was : "";
    ::setenv("STRATA_NO_AVX512", "1", 1);
    const std::string name = strata_cpu_device_kernel_name(make_device(1, false).get());
    ::setenv("STRATA_NO_AVX512", "0", 1);
    const std::string wide = strata_cpu_device_kernel_name(make_device(1, false).get());
    if (was != nullptr)
        ::setenv("STRATA_NO_AVX512", saved.c_str(), 1);
    else
        ::unsetenv("STRATA_NO_AVX512");
    EXPECT_EQ(name, "avx2+fma");
    EXPECT_EQ(wide, "avx512+fma");
}

// The AVX-512 set's dots and axpys of float, f16, bf16, e4m3, e5m2 and q8_0 rows (one row or several) give the AVX2
// set's bits on every length (32-element steps, 8-element steps, scalar tails; q8_0 in whole groups) and row count, so a CPU's choice between them never
// changes a token.
TEST(CpuKernelSets, Avx512DotsAndAxpysHaveTheAvx2Bits) {
    if (runnable_kernel_sets().size() < 3) GTEST_SKIP() << "this CPU or build has no AVX-512 kernel set";
    const strata::cpu::kernels &a = *strata::cpu::avx2_kernels(), &b = *strata::cpu::avx512_kernels();
    for (int64_t len = 1; len <= 150; ++len) {
        const int64_t stride = len + 3;
        constexpr int32_t max_rows = 17;
        const std::vector<float> q = random_floats(size_t(len), 70 + uint32_t(len), -3.0f, 3.0f);
        const std::vector<float> rows = random_floats(size_t(stride * max_rows), 170 + uint32_t(len), -40.0f, 40.0f);
        std::vector<uint16_t> rh(rows.size()), rb(rows.size());
        a.to_f16(rows.data(), rh.data(), static_cast<int64_t>(rows.size()));
        a.to_bf16(rows.data(), rb.data(), static_cast<int64_t>(rows.size()));
        const std::vector<uint8_t> r4 = fp8_codes(rows, true), r5 = fp8_codes(rows, false);
        const int64_t stride8 = ((len + 31) / 32) + 1; // groups per row, one of padding
        const std::vector<strata::kv_q8_0::group> r8 =
            q8_0_groups(random_floats(size_t(32 * stride8 * max_rows), 370 + uint32_t(len), -40.0f, 40.0f));
        const std::vector<float> w = random_floats(max_rows, 270 + uint32_t(len), -2.0f, 2.0f);
        auto same = [](const float *x, const float *y, size_t n) { return std::memcmp(x, y, n * sizeof(float)) == 0; };
        for (int32_t n_rows = 1; n_rows <= max_rows; ++n_rows) {
            SCOPED_TRACE("length " + std::to_string(len) + ", rows " + std::to_string(n_rows));
            float x[max_rows], y[max_rows];
            a.dot_rows(q.data(), rows.data(), stride, n_rows, len, x);
            b.dot_rows(q.data(), rows.data(), stride, n_rows, len, y);
            EXPECT_TRUE(same(x, y, size_t(n_rows))) << "dot_rows";
            a.dot_f16_rows(q.data(), rh.data(), stride, n_rows, len, x);
            b.dot_f16_rows(q.data(), rh.data(), stride, n_rows, len, y);
            EXPECT_TRUE(same(x, y, size_t(n_rows))) << "dot_f16_rows";
            a.dot_bf16_rows(q.data(), rb.data(), stride, n_rows, len, x);
            b.dot_bf16_rows(q.data(), rb.data(), stride, n_rows, len, y);
            EXPECT_TRUE(same(x, y, size_t(n_rows))) << "dot_bf16_rows";
            std::vector<float> ya(q), yb(q);
            a.axpy_rows(w.data(), rows.data(), stride, n_rows, ya.data(), len);
            b.axpy_rows(w.data(), rows.data(), stride, n_rows, yb.data(), len);
            EXPECT_TRUE(same(ya.data(), yb.data(), ya.size())) << "axpy_rows";
            a.axpy_f16_rows(w.data(), rh.data(), stride, n_rows, ya.data(), len);
            b.axpy_f16_rows(w.data(), rh.data(), stride, n_rows, yb.data(), len);
            EXPECT_TRUE(same(ya.data(), yb.data(), ya.size())) << "axpy_f16_rows";
            a.axpy_bf16_rows(w.data(), rb.data(), stride, n_rows, ya.data(), len);
            b.axpy_bf16_rows(w.data(), rb.data(), stride, n_rows, yb.data(), len);
            EXPECT_TRUE(same(ya.data(), yb.data(), ya.size())) << "axpy_bf16_rows";
            a.dot_e4m3_rows(q.data(), r4.data(), stride, n_rows, len, x);
            b.dot_e4m3_rows(q.data(), r4.data(), stride, n_rows, len, y);
            EXPECT_TRUE(same(x, y, size_t(n_rows))) << "dot_e4m3_rows";
            a.dot_e5m2_rows(q.data(), r5.data(), stride, n_rows, len, x);
            b.dot_e5m2_rows(q.data(), r5.data(), stride, n_rows, len, y);
            EXPECT_TRUE(same(x, y, size_t(n_rows))) << "dot_e5m2_rows";
            a.axpy_e4m3_rows(w.data(), r4.data(), stride, n_rows, ya.data(), len);
            b.axpy_e4m3_rows(w.data(), r4.data(), stride, n_rows, yb.data(), len);
            EXPECT_TRUE(same(ya.data(), yb.data(), ya.size())) << "axpy_e4m3_rows";
            a.axpy_e5m2_rows(w.data(), r5.data(), stride, n_rows, ya.data(), len);
            b.axpy_e5m2_rows(w.data(), r5.data(), stride, n_rows, yb.data(), len);
            EXPECT_TRUE(same(ya.data(), yb.data(), ya.size())) << "axpy_e5m2_rows";
            if (len % 32 == 0) { // q8_0 rows are whole groups; the stride is in groups
                a.dot_q8_0_rows(q.data(), r8.data(), stride8, n_rows, len, x);
                b.dot_q8_0_rows(q.data(), r8.data(), stride8, n_rows, len, y);
                EXPECT_TRUE(same(x, y, size_t(n_rows))) << "dot_q8_0_rows";
                a.axpy_q8_0_rows(w.data(), r8.data(), stride8, n_rows, ya.data(), len);
                b.axpy_q8_0_rows(w.data(), r8.data(), stride8, n_rows, yb.data(), len);
                EXPECT_TRUE(same(ya.data(), yb.data(), ya.size())) << "axpy_q8_0_rows";
            }
        }
        const float e1 = a.dot_e4m3(q.data(), r4.data(), len), e2 = b.dot_e4m3(q.data(), r4.data(), len);
        const float f1 = a.dot_e5m2(q.data(), r5.data(), len), f2 = b.dot_e5m2(q.data(), r5.data(), len);
        EXPECT_TRUE(same(&e1, &e2, 1) && same(&f1, &f2, 1)) << "single-row FP8 dots, length " << len;
        if (len % 32 == 0) {
            const float g1 = a.dot_q8_0(q.data(), r8.data(), len), g2 = b.dot_q8_0(q.data(), r8.data(), len);
            EXPECT_TRUE(same(&g1, &g2, 1)) << "single-row q8_0 dot, length " << len;
            std::vector<float> ya(q), yb(q);
            a.axpy_q8_0(w[3], r8.data(), ya.data(), len);
            b.axpy_q8_0(w[3], r8.data(), yb.data(), len);
            EXPECT_TRUE(same(ya.data(), yb.data(), ya.size())) << "single-row q8_0 axpy, length " << len;
        }
        const float d1 = a.dot(q.data(), rows.data(), len), d2 = b.dot(q.data(), rows.data(), len);
        const float h1 = a.dot_f16(q.data(), rh.data(), len), h2 = b.dot_f16(q.data(), rh.data(), len);
        const float b1 = a.dot_bf16(q.data(), rb.data(), len), b2 = b.dot_bf16(q.data(), rb.data(), len);
        EXPECT_TRUE(same(&d1, &d2, 1) && same(&h1, &h2, 1) && same(&b1, &b2, 1)) << "single-row dots, length " << len;
        std::vector<float> ya(q), yb(q);
        a.axpy(w[0], rows.data(), ya.data(), len);
        b.axpy(w[0], rows.data(), yb.data(), len);
        a.axpy_f16(w[1], rh.data(), ya.data(), len);
        b.axpy_f16(w[1], rh.data(), yb.data(), len);
        a.axpy_bf16(w[2], rb.data(), ya.data(), len);
        b.axpy_bf16(w[2], rb.data(), yb.data(), len);
        a.axpy_e4m3(w[4], r4.data(), ya.data(), len);
        b.axpy_e4m3(w[4], r4.data(), yb.data(), len);
        a.axpy_e5m2(w[5], r5.data(), ya.data(), len);
        b.axpy_e5m2(w[5], r5.data(), yb.data(), len);
        EXPECT_TRUE(same(ya.data(), yb.data(), ya.size())) << "single-row axpys, length " << len;
    }
}

TEST_F(CpuKernelPaths, RmsNormAgrees) {
    const int n_tokens = 3, dim = 4099; // odd: exercises the vector tails
    const auto x = random_floats(static_cast<size_t>(n_tokens) * dim, 1, -4.0f, 4.0f);
    const auto w = random_floats(dim, 2, 0.5f, 1.5f);
    std::vector<float> a(x.size()), b(x.size());
    ASSERT_EQ(ops().rms_norm(scalar_.get(), x.data(), w.data(), n_tokens, dim, 1e-6f, a.data(), &st_), STRATA_OK);
    ASSERT_EQ(ops().rms_norm(fast_.get(), x.data(), w.data(), n_tokens, dim, 1e-6f, b.data(), &st_), STRATA_OK);
    EXPECT_LT(elementwise_error(a, b), paths_tolerance);
}

TEST_F(CpuKernelPaths, SwigluAgrees) {
    const int64_t n = 70001;
    const auto g = random_floats(static_cast<size_t>(n), 3, -30.0f, 30.0f);
    const auto u = random_floats(static_cast<size_t>(n), 4, -3.0f, 3.0f);
    std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
    ASSERT_EQ(ops().swiglu(scalar_.get(), g.data(), u.data(), n, a.data(), &st_), STRATA_OK);
    ASSERT_EQ(ops().swiglu(fast_.get(), g.data(), u.data(), n, b.data(), &st_), STRATA_OK);
    EXPECT_LT(elementwise_error(a, b), paths_tolerance);
}

// The op runs over a batch's n_tokens x n_ff elements as one array, so the same token's elements sit at different
// offsets (vector body or tail, thread chunk edges) for different batch sizes; their bits must not change.
TEST(CpuKernelBatchInvariance, SwigluElementBitsDoNotDependOnPosition) {
    for (const bool scalar : {false, true}) {
        for (const int threads : {1, 3}) {
            device_ptr dev = make_device(threads, scalar);
            ASSERT_NE(dev, nullptr);
            const int64_t row = 172; // stories260K's n_ff: not a multiple of 8
            const auto g = random_floats(static_cast<size_t>(row) * 300, 11, -12.0f, 12.0f);
            const auto u = random_floats(g.size(), 12, -3.0f, 3.0f);
            std::vector<float> whole(g.size()), one(static_cast<size_t>(row));
            strata_status st{};
            ASSERT_EQ(ops().swiglu(dev.get(), g.data(), u.data(), static_cast<int64_t>(g.size()), whole.data(), &st),
                      STRATA_OK);
            for (size_t t = 0; t < 300; ++t) {
                const size_t at = t * static_cast<size_t>(row);
                ASSERT_EQ(ops().swiglu(dev.get(), g.data() + at, u.data() + at, row, one.data(), &st), STRATA_OK);
                ASSERT_EQ(std::memcmp(one.data(), whole.data() + at, one.size() * sizeof(float)), 0)
                    << "row " << t << " alone differs from the same row inside the batch ("
                    << (scalar ? "scalar" : "fast") << " kernels, " << threads << " threads)";
            }
        }
    }
}

TEST_F(CpuKernelPaths, AddAgreesExactly) {
    const int64_t n = 100005;
    const auto x = random_floats(static_cast<size_t>(n), 5);
    const auto y = random_floats(static_cast<size_t>(n), 6);
    std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
    ASSERT_EQ(ops().add(scalar_.get(), x.data(), y.data(), n, a.data(), &st_), STRATA_OK);
    ASSERT_EQ(ops().add(fast_.get(), x.data(), y.data(), n, b.data(), &st_), STRATA_OK);
    EXPECT_EQ(a, b);
}

TEST_F(CpuKernelPaths, SoftmaxAgrees) {
    const int rows = 4, cols = 32003;
    const auto x = random_floats(static_cast<size_t>(rows) * cols, 7, -30.0f, 30.0f);
    auto a = x, b = x;
    ASSERT_EQ(ops().softmax(scalar_.get(), a.data(), rows, cols, &st_), STRATA_OK);
    ASSERT_EQ(ops().softmax(fast_.get(), b.data(), rows, cols, &st_), STRATA_OK);
    // Probabilities below ~1e-30 are noise relative to the row; compare everything above that elementwise.
    for (auto *v : {&a, &b})
        for (auto &p : *v) p = p < 1e-30f ? 0.0f : p;
    EXPECT_LT(elementwise_error(a, b), paths_tolerance);
}

TEST_F(CpuKernelPaths, AttentionAgrees) {
    for (int head_dim : {128, 20}) {
        const attention_case c{5, 8, 2, head_dim, 300};
        const attention_data d = make_attention_data(c, 8);
        std::vector<float> a(d.q.size()), b(d.q.size());
        const strata_attention_args aa = attention_args(c, d, a.data());
        const strata_attention_args ab = attention_args(c, d, b.data());
        ASSERT_EQ(ops().attention(scalar_.get(), &aa, &st_), STRATA_OK);
        ASSERT_EQ(ops().attention(fast_.get(), &ab, &st_), STRATA_OK);
        EXPECT_LT(normwise_error(b, a), paths_tolerance) << "head_dim " << head_dim;
    }
}

// A NaN among the scores (a damaged weight upstream) must come out of softmax and attention as NaN, on both kernel
// sets, wherever it sits (vector body or tail): the engine turns NaN logits into a request error, and a softmax that
// skipped it would hand back plausible tokens instead.
TEST(CpuKernelNan, ANanScoreMakesSoftmaxAndAttentionNan) {
    for (const bool scalar : {true, false}) {
        device_ptr dev = make_device(1, scalar);
        ASSERT_NE(dev, nullptr);
        const std::string set = strata_cpu_device_kernel_name(dev.get());
        strata_status st{};
        for (const int at : {0, 5, 17, 36}) { // 37 columns: the first vector, a later one, the scalar tail
            auto x = random_floats(37, 21, -5.0f, 5.0f);
            x[static_cast<size_t>(at)] = std::numeric_limits<float>::quiet_NaN();
            ASSERT_EQ(ops().softmax(dev.get(), x.data(), 1, 37, &st), STRATA_OK);
            for (const float p : x) EXPECT_TRUE(std::isnan(p)) << set << ", NaN at " << at;
        }
        const attention_case c{3, 4, 2, 20, 40};
        attention_data d = make_attention_data(c, 9);
        std::fill(d.k.begin(), d.k.begin() + 20, std::numeric_limits<float>::quiet_NaN()); // key row 0 of kv head 0
        std::vector<float> out(d.q.size());
        const strata_attention_args args = attention_args(c, d, out.data());
        ASSERT_EQ(ops().attention(dev.get(), &args, &st), STRATA_OK);
        EXPECT_TRUE(std::any_of(out.begin(), out.end(), [](float v) { return std::isnan(v); })) << set;
    }
}

TEST_F(CpuKernelPaths, RopeAndMatmulDoNotDependOnTheKernelSet) {
    auto a = random_floats(5 * 4 * 64, 9), b = a;
    const std::vector<int32_t> pos = {100, 101, 102, 103, 104};
    ASSERT_EQ(ops().rope(scalar_.get(), a.data(), 5, 4, 64, 64, pos.data(), 10000.0f, STRATA_ROPE_NEOX, &st_), 0);
    ASSERT_EQ(ops().rope(fast_.get(), b.data(), 5, 4, 64, 64, pos.data(), 10000.0f, STRATA_ROPE_NEOX, &st_), 0);
    EXPECT_EQ(a, b);

    const auto w = random_floats(65 * 48, 10);
    const auto x = random_floats(3 * 48, 11);
    const strata_tensor_view view = f32_view(w, 65, 48);
    std::vector<float> ya(65 * 3), yb(65 * 3);
    ASSERT_EQ(ops().matmul(scalar_.get(), &view, x.data(), 3, ya.data(), &st_), STRATA_OK);
    ASSERT_EQ(ops().matmul(fast_.get(), &view, x.data(), 3, yb.data(), &st_), STRATA_OK);
    EXPECT_EQ(ya, yb);
}

} // namespace

// The 16-bit KV kernels (ABI 1.20) of each kernel set: to_f16 / to_bf16 store the SDK's scalar conversion bit for bit
// (specials and ties included), and dot / axpy over 16-bit rows give the bits of the float kernels over the same rows
// widened to float first, so a 16-bit cache attends exactly as a float cache holding the rounded values.
TEST(CpuKernel16Bit, ConversionsMatchTheSdkAndDotsMatchTheFloatKernelsOverWidenedRows) {
    const std::vector<const strata::cpu::kernels *> sets = runnable_kernel_sets();
    std::vector<float> x = random_floats(4099, 77, -70000.0f, 70000.0f);
    const std::vector<float> small = random_floats(4099, 78, -1.0e-5f, 1.0e-5f);
    x.insert(x.end(), small.begin(), small.end());
    for (float special : {0.0f, -0.0f, 1.0f + 1.0f / 2048.0f, 1.0f + 3.0f / 2048.0f, 65504.0f, 65519.0f, 65520.0f,
                          3.0e-7f, 6.0e-8f, 1.0e-40f, std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::max(), 1.00390625f, 1.01171875f})
        x.push_back(special);
    const int64_t n = static_cast<int64_t>(x.size());
    for (const strata::cpu::kernels *k : sets) {
        SCOPED_TRACE(k->name);
        std::vector<uint16_t> h(x.size()), b(x.size());
        k->to_f16(x.data(), h.data(), n);
        k->to_bf16(x.data(), b.data(), n);
        for (size_t i = 0; i < x.size(); ++i) {
            ASSERT_EQ(h[i], strata::float16::fp32_to_fp16(x[i])) << "f16 of " << x[i] << " (element " << i << ")";
            ASSERT_EQ(b[i], strata::float16::fp32_to_bf16(x[i])) << "bf16 of " << x[i] << " (element " << i << ")";
        }
        const std::vector<float> q = random_floats(4099, 79, -2.0f, 2.0f);
        std::vector<uint16_t> rh(q.size()), rb(q.size());
        const std::vector<float> r = random_floats(q.size(), 80, -3.0f, 3.0f);
        k->to_f16(r.data(), rh.data(), static_cast<int64_t>(r.size()));
        k->to_bf16(r.data(), rb.data(), static_cast<int64_t>(r.size()));
        std::vector<float> wh(r.size()), wb(r.size());
        for (size_t i = 0; i < r.size(); ++i) {
            wh[i] = strata::float16::fp16_to_fp32(rh[i]);
            wb[i] = strata::float16::bf16_to_fp32(rb[i]);
        }
        for (int64_t len : {1, 7, 8, 31, 32, 33, 100, 4099}) {
            SCOPED_TRACE("length " + std::to_string(len));
            const float dh = k->dot_f16(q.data(), rh.data(), len), dw = k->dot(q.data(), wh.data(), len);
            const float db = k->dot_bf16(q.data(), rb.data(), len), dbw = k->dot(q.data(), wb.data(), len);
            EXPECT_EQ(std::memcmp(&dh, &dw, sizeof dh), 0) << dh << " vs " << dw;
            EXPECT_EQ(std::memcmp(&db, &dbw, sizeof db), 0) << db << " vs " << dbw;
            std::vector<float> y1(q.begin(), q.begin() + len), y2 = y1, y3 = y1, y4 = y1;
            k->axpy_f16(0.37f, rh.data(), y1.data(), len);
            k->axpy(0.37f, wh.data(), y2.data(), len);
            k->axpy_bf16(-1.25f, rb.data(), y3.data(), len);
            k->axpy(-1.25f, wb.data(), y4.data(), len);
            EXPECT_EQ(std::memcmp(y1.data(), y2.data(), y1.size() * sizeof(float)), 0);
            EXPECT_EQ(std::memcmp(y3.data(), y4.data(), y3.size() * sizeof(float)), 0);
        }
    }
}

// The multi-row kernels attention calls (dot_*_rows, axpy_*_rows; float, f16, bf16, e4m3, e5m2 and q8_0 rows) of each
// kernel set: every row's dot has the single-row kernel's bits, and applying n rows to y has the bits of n single-row axpy calls in row order — for any
// row count (the 2-row pairs, the 4-row step, odd tails), lengths with and without 8- and 32-element tails, and
// padded strides. A multi-row kernel that summed in another order would change attention's bits with the step.
TEST(CpuKernelRows, MultiRowDotsAndAxpysHaveTheSingleRowBits) {
    const std::vector<const strata::cpu::kernels *> sets = runnable_kernel_sets();
    for (const strata::cpu::kernels *k : sets) {
        SCOPED_TRACE(k->name);
        for (int64_t len : {1, 7, 8, 13, 32, 40, 64, 100, 128}) {
            const int64_t stride = len + 5;
            constexpr int32_t max_rows = 17; // past a step of rows_per_step
            const std::vector<float> q = random_floats(len, 90, -2.0f, 2.0f);
            const std::vector<float> rows = random_floats(stride * max_rows, 91, -3.0f, 3.0f);
            std::vector<uint16_t> rh(rows.size()), rb(rows.size());
            k->to_f16(rows.data(), rh.data(), static_cast<int64_t>(rows.size()));
            k->to_bf16(rows.data(), rb.data(), static_cast<int64_t>(rows.size()));
            const std::vector<uint8_t> r4 = fp8_codes(rows, true), r5 = fp8_codes(rows, false);
            const int64_t stride8 = len / 32 + 2; // groups per row, padded
            const std::vector<strata::kv_q8_0::group> r8 =
                q8_0_groups(random_floats(size_t(32 * stride8 * max_rows), 93, -3.0f, 3.0f));
            const std::vector<float> w = random_floats(max_rows, 92, -1.0f, 1.0f);
            for (int32_t n_rows = 1; n_rows <= max_rows; ++n_rows) {
                SCOPED_TRACE("length " + std::to_string(len) + ", rows " + std::to_string(n_rows));
                float got[max_rows], got_h[max_rows], got_b[max_rows];
                k->dot_rows(q.data(), rows.data(), stride, n_rows, len, got);
                k->dot_f16_rows(q.data(), rh.data(), stride, n_rows, len, got_h);
                k->dot_bf16_rows(q.data(), rb.data(), stride, n_rows, len, got_b);
                for (int32_t r = 0; r < n_rows; ++r) {
                    const float want = k->dot(q.data(), rows.data() + r * stride, len);
                    const float want_h = k->dot_f16(q.data(), rh.data() + r * stride, len);
                    const float want_b = k->dot_bf16(q.data(), rb.data() + r * stride, len);
                    EXPECT_EQ(std::memcmp(&got[r], &want, sizeof want), 0) << "f32 row " << r;
                    EXPECT_EQ(std::memcmp(&got_h[r], &want_h, sizeof want), 0) << "f16 row " << r;
                    EXPECT_EQ(std::memcmp(&got_b[r], &want_b, sizeof want), 0) << "bf16 row " << r;
                }
                std::vector<float> y(q), y_h(q), y_b(q), want(q), want_h(q), want_b(q);
                k->axpy_rows(w.data(), rows.data(), stride, n_rows, y.data(), len);
                k->axpy_f16_rows(w.data(), rh.data(), stride, n_rows, y_h.data(), len);
                k->axpy_bf16_rows(w.data(), rb.data(), stride, n_rows, y_b.data(), len);
                for (int32_t r = 0; r < n_rows; ++r) {
                    k->axpy(w[r], rows.data() + r * stride, want.data(), len);
                    k->axpy_f16(w[r], rh.data() + r * stride, want_h.data(), len);
                    k->axpy_bf16(w[r], rb.data() + r * stride, want_b.data(), len);
                }
                EXPECT_EQ(std::memcmp(y.data(), want.data(), y.size() * sizeof(float)), 0) << "f32";
                EXPECT_EQ(std::memcmp(y_h.data(), want_h.data(), y.size() * sizeof(float)), 0) << "f16";
                EXPECT_EQ(std::memcmp(y_b.data(), want_b.data(), y.size() * sizeof(float)), 0) << "bf16";
                // FP8 and (in whole groups, the stride in groups) q8_0 rows.
                float got_4[max_rows], got_5[max_rows], got_8[max_rows];
                k->dot_e4m3_rows(q.data(), r4.data(), stride, n_rows, len, got_4);
                k->dot_e5m2_rows(q.data(), r5.data(), stride, n_rows, len, got_5);
                if (len % 32 == 0) k->dot_q8_0_rows(q.data(), r8.data(), stride8, n_rows, len, got_8);
                for (int32_t r = 0; r < n_rows; ++r) {
                    const float want_4 = k->dot_e4m3(q.data(), r4.data() + r * stride, len);
                    const float want_5 = k->dot_e5m2(q.data(), r5.data() + r * stride, len);
                    EXPECT_EQ(std::memcmp(&got_4[r], &want_4, sizeof(float)), 0) << "e4m3 row " << r;
                    EXPECT_EQ(std::memcmp(&got_5[r], &want_5, sizeof(float)), 0) << "e5m2 row " << r;
                    if (len % 32 != 0) continue;
                    const float want_8 = k->dot_q8_0(q.data(), r8.data() + r * stride8, len);
                    EXPECT_EQ(std::memcmp(&got_8[r], &want_8, sizeof(float)), 0) << "q8_0 row " << r;
                }
                std::vector<float> y_4(q), y_5(q), y_8(q), want_4(q), want_5(q), want_8(q);
                k->axpy_e4m3_rows(w.data(), r4.data(), stride, n_rows, y_4.data(), len);
                k->axpy_e5m2_rows(w.data(), r5.data(), stride, n_rows, y_5.data(), len);
                if (len % 32 == 0) k->axpy_q8_0_rows(w.data(), r8.data(), stride8, n_rows, y_8.data(), len);
                for (int32_t r = 0; r < n_rows; ++r) {
                    k->axpy_e4m3(w[r], r4.data() + r * stride, want_4.data(), len);
                    k->axpy_e5m2(w[r], r5.data() + r * stride, want_5.data(), len);
                    if (len % 32 == 0) k->axpy_q8_0(w[r], r8.data() + r * stride8, want_8.data(), len);
                }
                EXPECT_EQ(std::memcmp(y_4.data(), want_4.data(), y.size() * sizeof(float)), 0) << "e4m3";
                EXPECT_EQ(std::memcmp(y_5.data(), want_5.data(), y.size() * sizeof(float)), 0) << "e5m2";
                if (len % 32 == 0) {
                    EXPECT_EQ(std::memcmp(y_8.data(), want_8.data(), y.size() * sizeof(float)), 0) << "q8_0";
                }
            }
        }
    }
}

// The widening a query block's tokens share (widen_*, ABI-internal): rows widened once and read by the float
// multi-row kernels give the bits of the row type's own multi-row kernels, for every type, kernel set, row count and
// length (tails included; q8_0 in whole groups). Attention relies on it to widen each step's rows once per block.
TEST(CpuKernelRows, WideningOnceGivesTheRowTypesBits) {
    constexpr int32_t max_rows = 16;
    for (const strata::cpu::kernels *k : runnable_kernel_sets()) {
        SCOPED_TRACE(k->name);
        for (int64_t len : {1, 8, 13, 32, 40, 64, 100, 128, 256}) {
            SCOPED_TRACE("length " + std::to_string(len));
            const int64_t stride = len + 64; // a row of the cache holds other heads after this one
            const std::vector<float> q = random_floats(len, 94, -2.0f, 2.0f);
            const std::vector<float> rows = random_floats(stride * max_rows, 95, -300.0f, 300.0f);
            const std::vector<float> w = random_floats(max_rows, 96, -1.0f, 1.0f);
            std::vector<uint16_t> rh(rows.size()), rb(rows.size());
            k->to_f16(rows.data(), rh.data(), static_cast<int64_t>(rows.size()));
            k->to_bf16(rows.data(), rb.data(), static_cast<int64_t>(rows.size()));
            const std::vector<uint8_t> r4 = fp8_codes(rows, true), r5 = fp8_codes(rows, false);
            const int64_t stride8 = stride / 32 + 1;
            const std::vector<strata::kv_q8_0::group> r8 = q8_0_groups(random_floats(size_t(32 * stride8 * max_rows), 97));
            // Each type: its widening of n_rows rows, then the float kernels, against its own kernels.
            auto check = [&](const char *type, auto widen, auto dot_rows, auto axpy_rows, const auto *x, int64_t s) {
                std::vector<float> wide(size_t(max_rows * len));
                for (int32_t n_rows : {1, 2, 3, 5, 16}) {
                    for (int32_t r = 0; r < n_rows; ++r) widen(x + r * s, wide.data() + r * len, len);
                    float got[max_rows], want[max_rows];
                    k->dot_rows(q.data(), wide.data(), len, n_rows, len, got);
                    dot_rows(q.data(), x, s, n_rows, len, want);
                    EXPECT_EQ(std::memcmp(got, want, sizeof(float) * size_t(n_rows)), 0) << type << " dots, " << n_rows;
                    std::vector<float> y1(q), y2(q);
                    k->axpy_rows(w.data(), wide.data(), len, n_rows, y1.data(), len);
                    axpy_rows(w.data(), x, s, n_rows, y2.data(), len);
                    EXPECT_EQ(std::memcmp(y1.data(), y2.data(), sizeof(float) * y1.size()), 0)
                        << type << " axpys, " << n_rows;
                }
            };
            check("f16", k->widen_f16, k->dot_f16_rows, k->axpy_f16_rows, rh.data(), stride);
            check("bf16", k->widen_bf16, k->dot_bf16_rows, k->axpy_bf16_rows, rb.data(), stride);
            check("e4m3", k->widen_e4m3, k->dot_e4m3_rows, k->axpy_e4m3_rows, r4.data(), stride);
            check("e5m2", k->widen_e5m2, k->dot_e5m2_rows, k->axpy_e5m2_rows, r5.data(), stride);
            if (len % 32 == 0) check("q8_0", k->widen_q8_0, k->dot_q8_0_rows, k->axpy_q8_0_rows, r8.data(), stride8);
        }
    }
}

// The FP8 KV kernels (ABI 1.20) of each kernel set: the value tables hold the SDK's decoding of all 256 codes, and
// dot / axpy over FP8 rows give the bits of the float kernels over the same rows widened first, every code (NaN ones
// included) read as its table value.
TEST(CpuKernelFp8, TablesAreTheSdkValuesAndDotsMatchTheFloatKernelsOverWidenedRows) {
    const strata::cpu::fp8_value_tables &t = strata::cpu::fp8_tables();
    for (int c = 0; c < 256; ++c) {
        const float e4 = strata::float8::e4m3_to_fp32(static_cast<uint8_t>(c)), e5 = strata::float8::e5m2_to_fp32(static_cast<uint8_t>(c));
        ASSERT_EQ(std::memcmp(&t.e4m3[c], &e4, 4), 0) << c;
        ASSERT_EQ(std::memcmp(&t.e5m2[c], &e5, 4), 0) << c;
    }
    const std::vector<const strata::cpu::kernels *> sets = runnable_kernel_sets();
    const std::vector<float> q = random_floats(4099, 81, -2.0f, 2.0f);
    const std::vector<float> r = random_floats(q.size(), 82, -500.0f, 500.0f);
    for (const strata::cpu::kernels *k : sets) {
        SCOPED_TRACE(k->name);
        for (const bool e4m3 : {true, false}) {
            SCOPED_TRACE(e4m3 ? "e4m3" : "e5m2");
            const float *table = e4m3 ? t.e4m3 : t.e5m2;
            std::vector<uint8_t> codes(r.size());
            std::vector<float> w(r.size());
            for (size_t i = 0; i < r.size(); ++i) {
                codes[i] = e4m3 ? strata::float8::fp32_to_e4m3(r[i]) : strata::float8::fp32_to_e5m2(r[i]);
                w[i] = table[codes[i]];
            }
            for (int64_t len : {1, 7, 8, 31, 32, 33, 100, 4099}) {
                SCOPED_TRACE("length " + std::to_string(len));
                const float d8 = (e4m3 ? k->dot_e4m3 : k->dot_e5m2)(q.data(), codes.data(), len);
                const float dw = k->dot(q.data(), w.data(), len);
                EXPECT_EQ(std::memcmp(&d8, &dw, sizeof d8), 0) << d8 << " vs " << dw;
                std::vector<float> y1(q.begin(), q.begin() + len), y2 = y1;
                (e4m3 ? k->axpy_e4m3 : k->axpy_e5m2)(0.37f, codes.data(), y1.data(), len);
                k->axpy(0.37f, w.data(), y2.data(), len);
                EXPECT_EQ(std::memcmp(y1.data(), y2.data(), y1.size() * sizeof(float)), 0);
            }
            // A NaN code reaches the result on every set (a NaN key must not read as a number).
            std::vector<uint8_t> nan_row(40, 0x38);
            nan_row[37] = 0x7f;
            auto dot = e4m3 ? k->dot_e4m3 : k->dot_e5m2;
            EXPECT_TRUE(std::isnan(dot(q.data(), nan_row.data(), 40)));
            nan_row[37] = 0x38;
            for (const uint8_t nan_code : {uint8_t{0x7f}, uint8_t{0xff}}) {
                nan_row[3] = nan_code;
                EXPECT_TRUE(std::isnan(dot(q.data(), nan_row.data(), 40))) << int(nan_code);
                std::vector<float> y(40, 1.0f);
                (e4m3 ? k->axpy_e4m3 : k->axpy_e5m2)(0.5f, nan_row.data(), y.data(), 40);
                EXPECT_TRUE(std::isnan(y[3])) << int(nan_code);
                EXPECT_FALSE(std::isnan(y[4]));
            }
            // Every code, as a row of 256: each lane of every set reads each code as its table value.
            std::vector<uint8_t> all(256);
            for (int c = 0; c < 256; ++c) all[size_t(c)] = static_cast<uint8_t>(c);
            std::vector<float> got(256, 0.0f);
            (e4m3 ? k->axpy_e4m3 : k->axpy_e5m2)(1.0f, all.data(), got.data(), 256);
            for (int c = 0; c < 256; ++c) {
                if (std::isnan(table[c])) EXPECT_TRUE(std::isnan(got[size_t(c)])) << c;
                else EXPECT_EQ(got[size_t(c)], table[c]) << c;
            }
        }
    }
}

// The q8_0 KV kernels (ABI 1.23) of each kernel set: dot / axpy over q8_0 groups give the bits of the float kernels
// over the groups' values widened first (d * q, exact), for rows of 1 to 96 groups, scales from subnormal halves to
// 2^15, every int8 value, a NaN scale (a group that held a NaN or an infinity) reaching the result.
TEST(CpuKernelQ8_0, DotsAndAxpysMatchTheFloatKernelsOverWidenedGroups) {
    const std::vector<const strata::cpu::kernels *> sets = runnable_kernel_sets();
    constexpr int64_t n_groups = 96;
    const std::vector<float> q = random_floats(32 * n_groups, 91, -2.0f, 2.0f);
    std::vector<strata::kv_q8_0::group> groups(n_groups);
    std::mt19937 rng(92);
    for (int64_t g = 0; g < n_groups; ++g) {
        // Scales across the half's range: subnormal (0x0001), small, ordinary, large (0x7800 = 32768).
        static const uint16_t scales[] = {0x0001, 0x0400, 0x2e66, 0x3c00, 0x5640, 0x7800};
        groups[size_t(g)].d = scales[g % 6];
        for (int i = 0; i < 32; ++i)
            groups[size_t(g)].q[i] = static_cast<int8_t>(g == 0 ? i * 8 - 128 + (i == 0) : int(rng() % 256) - 128);
    }
    std::vector<float> w(q.size());
    for (size_t i = 0; i < w.size(); ++i) w[i] = strata::kv_q8_0::value(groups[i / 32], static_cast<int>(i % 32));
    for (const strata::cpu::kernels *k : sets) {
        SCOPED_TRACE(k->name);
        for (int64_t len : {int64_t{32}, int64_t{64}, int64_t{96}, int64_t{128}, 32 * n_groups}) {
            SCOPED_TRACE("length " + std::to_string(len));
            const float d8 = k->dot_q8_0(q.data(), groups.data(), len), dw = k->dot(q.data(), w.data(), len);
            EXPECT_EQ(std::memcmp(&d8, &dw, sizeof d8), 0) << d8 << " vs " << dw;
            std::vector<float> y1(q.begin(), q.begin() + len), y2 = y1;
            k->axpy_q8_0(-0.61f, groups.data(), y1.data(), len);
            k->axpy(-0.61f, w.data(), y2.data(), len);
            EXPECT_EQ(std::memcmp(y1.data(), y2.data(), y1.size() * sizeof(float)), 0);
        }
        // A NaN scale makes its group's values NaN, and only them.
        std::vector<strata::kv_q8_0::group> nan_groups(groups.begin(), groups.begin() + 3);
        nan_groups[1].d = 0x7e00;
        EXPECT_TRUE(std::isnan(k->dot_q8_0(q.data(), nan_groups.data(), 96)));
        std::vector<float> y(96, 1.0f);
        k->axpy_q8_0(0.5f, nan_groups.data(), y.data(), 96);
        for (int i = 0; i < 96; ++i) EXPECT_EQ(std::isnan(y[size_t(i)]), i >= 32 && i < 64) << i;
    }
}

// The SDK's q8_0 quantizer keeps what ggml's reference keeps and defines what it leaves undefined: an all-zero group
// is d = 0 and zeros, the largest magnitude becomes +-127, a group with a NaN or an infinity reads back as NaN
// (ggml would convert NaN to int8), and a group whose scale underflows float32 reads back as zeros.
TEST(CpuKernelQ8_0, TheQuantizerIsGgmlsReferenceAndDefinesNonFiniteGroups) {
    float x[32] = {};
    strata::kv_q8_0::group g{};
    strata::kv_q8_0::quantize(x, &g);
    EXPECT_EQ(g.d, 0);
    for (int i = 0; i < 32; ++i) EXPECT_EQ(g.q[i], 0);
    for (int i = 0; i < 32; ++i) x[i] = float(i - 16) * 0.25f; // amax 4 at i = 0
    strata::kv_q8_0::quantize(x, &g);
    EXPECT_EQ(g.d, strata::float16::fp32_to_fp16(4.0f / 127.0f));
    EXPECT_EQ(g.q[0], -127);
    EXPECT_EQ(g.q[16], 0);
    EXPECT_EQ(g.q[31], int(std::round(15 * 0.25f * (1.0f / (4.0f / 127.0f)))));
    for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                      -std::numeric_limits<float>::infinity()}) {
        x[7] = bad;
        strata::kv_q8_0::quantize(x, &g);
        for (int i = 0; i < 32; ++i) EXPECT_TRUE(std::isnan(strata::kv_q8_0::value(g, i))) << bad << " " << i;
    }
    for (int i = 0; i < 32; ++i) x[i] = (i % 2 ? 1.0f : -1.0f) * 1e-39f; // d = amax / 127 is a float32 subnormal
    strata::kv_q8_0::quantize(x, &g);
    for (int i = 0; i < 32; ++i) EXPECT_EQ(strata::kv_q8_0::value(g, i), 0.0f) << i;
}

// attend_block over a chunk of query heads gives every head the bits it gets alone, whatever the chunk's size and
// first head (chunks that start inside a KV head's group and cross into the next one included), for one token and
// for a block of two with different contexts (float16 rows then widened once per step for both), for float and
// float16 rows read in runs of 8 (a paged cache's blocks), with a soft-cap and a sliding window as well; and
// heads_per_item keeps a group's heads together when an item holds more than one group.
TEST(CpuAttentionChunks, EveryChunkOfHeadsGivesEachHeadTheBitsItGetsAlone) {
    const std::vector<const strata::cpu::kernels *> sets = runnable_kernel_sets();
    constexpr int32_t head_dim = 40, n_kv = 37, run = 8;
    for (const strata::cpu::kernels *k : sets)
        for (int32_t group : {1, 2, 3})
            for (bool half : {false, true})
                for (bool terms_on : {false, true}) {
                    SCOPED_TRACE(std::string(k->name) + " group " + std::to_string(group) + (half ? " f16" : " f32") +
                                 (terms_on ? " softcap+window" : ""));
                    const int32_t n_kv_heads = 2, n_heads = n_kv_heads * group;
                    const int64_t row = int64_t{n_kv_heads} * head_dim;
                    const std::vector<float> q = cpu_test::random_floats(size_t(n_heads) * head_dim, 101, -1.0f, 1.0f);
                    const std::vector<float> keys = cpu_test::random_floats(size_t(n_kv * row), 102, -1.0f, 1.0f);
                    const std::vector<float> values = cpu_test::random_floats(size_t(n_kv * row), 103, -1.0f, 1.0f);
                    std::vector<strata::cpu::f16_element> keys16(keys.size()), values16(values.size());
                    for (size_t i = 0; i < keys.size(); ++i) {
                        keys16[i].bits = strata::float16::fp32_to_fp16(keys[i]);
                        values16[i].bits = strata::float16::fp32_to_fp16(values[i]);
                    }
                    strata::cpu::score_terms terms;
                    if (terms_on) terms = {4.0f, 9};
                    // A second query token with a shorter context, for blocks of two (whose f16 rows are widened
                    // once per step for both tokens).
                    const std::vector<float> q2 = cpu_test::random_floats(q.size(), 104, -1.0f, 1.0f);
                    constexpr int64_t n_kv2 = n_kv - 5;
                    // Runs of `run` rows, starting at the chunk's first KV head; out2 non-null: q2's token attended
                    // in the same block.
                    auto attend = [&](int32_t h0, int32_t count, float *out, float *out2 = nullptr,
                                      bool second_alone = false) {
                        const strata::cpu::head_chunk chunk{count, group, h0 % group, head_dim};
                        const int64_t offset = int64_t{h0 / group} * head_dim;
                        std::vector<float> scores(2 * size_t(count) * n_kv);
                        auto runs = [&](const auto &fn, int64_t lo, int64_t hi, strata::cpu::kv_part, bool) {
                            for (int64_t j0 = lo / run * run; j0 < hi; j0 += run) {
                                const int64_t n = std::min<int64_t>(run, hi - j0);
                                if (half)
                                    fn(j0, n, keys16.data() + j0 * row + offset, values16.data() + j0 * row + offset,
                                       row);
                                else
                                    fn(j0, n, keys.data() + j0 * row + offset, values.data() + j0 * row + offset, row);
                            }
                        };
                        const strata::cpu::block_token tokens[2] = {
                            {(second_alone ? q2 : q).data() + int64_t{h0} * head_dim, out, terms.first,
                             second_alone ? n_kv2 : n_kv},
                            {q2.data() + int64_t{h0} * head_dim, out2, terms.first, n_kv2}};
                        strata::cpu::attend_block(*k, tokens, out2 != nullptr ? 2 : 1, chunk, head_dim, 0.125f,
                                                  terms.softcap, runs, scores.data(), int64_t{count} * n_kv, nullptr,
                                                  0, 1);
                    };
                    std::vector<float> alone(size_t(n_heads) * head_dim), alone2(alone.size());
                    for (int32_t h = 0; h < n_heads; ++h) {
                        attend(h, 1, alone.data() + int64_t{h} * head_dim);
                        attend(h, 1, alone2.data() + int64_t{h} * head_dim, nullptr, true);
                    }
                    for (float x : alone) ASSERT_TRUE(std::isfinite(x));
                    for (int32_t h0 = 0; h0 < n_heads; ++h0)
                        for (int32_t count = 1; h0 + count <= n_heads; ++count) {
                            const size_t at = size_t(h0) * head_dim;
                            std::vector<float> out(size_t(count) * head_dim), out2(out.size());
                            attend(h0, count, out.data());
                            EXPECT_EQ(std::memcmp(out.data(), alone.data() + at, out.size() * sizeof(float)), 0)
                                << "heads " << h0 << ".." << h0 + count - 1;
                            attend(h0, count, out.data(), out2.data());
                            EXPECT_EQ(std::memcmp(out.data(), alone.data() + at, out.size() * sizeof(float)), 0)
                                << "heads " << h0 << ".." << h0 + count - 1 << ", first token of a block of two";
                            EXPECT_EQ(std::memcmp(out2.data(), alone2.data() + at, out.size() * sizeof(float)), 0)
                                << "heads " << h0 << ".." << h0 + count - 1 << ", second token of a block of two";
                        }
                }
    using strata::cpu::heads_per_item;
    EXPECT_EQ(heads_per_item(12, 1, 1, 2), 12);  // one decode token, 2 threads: its heads together
    EXPECT_EQ(heads_per_item(12, 1, 64, 2), 12); // a prefill: a token's heads together
    EXPECT_EQ(heads_per_item(32, 4, 1, 4), 16);  // 2 items for 4 threads, whole groups
    EXPECT_EQ(heads_per_item(32, 4, 1, 6), 12);  // 3 wanted: 11 heads rounded up to whole groups
    EXPECT_EQ(heads_per_item(32, 8, 1, 32), 2);  // more items wanted than groups: parts of a group
    EXPECT_EQ(heads_per_item(32, 1, 4, 16), 16); // 4 tokens, 8 items wanted: 2 per token
    EXPECT_EQ(heads_per_item(256, 1, 1, 1), strata::cpu::max_chunk_heads);
    // attention_items covers every (token, head) once, each item's heads those of a block of consecutive tokens (of
    // query_block tokens where there are at least 2 * threads * query_block, else one), q/out at the head.
    for (int32_t n_tokens : {1, 3, 64, 100})
        for (auto [n_heads, n_kv_heads] : {std::pair{12, 12}, std::pair{32, 8}, std::pair{6, 2}, std::pair{200, 100}})
            for (int threads : {1, 2, 5, 16}) {
                SCOPED_TRACE(std::to_string(n_tokens) + " tokens, " + std::to_string(n_heads) + "/" +
                             std::to_string(n_kv_heads) + " heads, " + std::to_string(threads) + " threads");
                const strata::cpu::attention_items items(n_tokens, n_heads, n_kv_heads, 16, 100, threads, 1 << 15);
                std::vector<int> seen(size_t(n_tokens) * n_heads, 0);
                ASSERT_GE(items.grain, 1);
                EXPECT_EQ(items.block, n_tokens >= 2 * threads * strata::cpu::query_block ? strata::cpu::query_block : 1);
                for (int64_t i = 0; i < items.n_items; ++i) {
                    const strata::cpu::head_chunk c = items.chunk(i, 16);
                    const int32_t h0 = items.first_head(i);
                    ASSERT_GE(c.n_heads, 1);
                    ASSERT_LE(c.n_heads, strata::cpu::max_chunk_heads);
                    ASSERT_LT(items.first_token(i), items.end_token(i));
                    ASSERT_LE(items.end_token(i) - items.first_token(i), items.block);
                    EXPECT_EQ(items.kv_offset(i, 16) + c.offset(c.n_heads - 1),
                              int64_t{(h0 + c.n_heads - 1) / (n_heads / n_kv_heads)} * 16);
                    for (int64_t t = items.first_token(i); t < items.end_token(i); ++t) {
                        EXPECT_EQ(items.at(i, t), (t * n_heads + h0) * 16);
                        for (int32_t h = h0; h < h0 + c.n_heads; ++h) ++seen[size_t(t * n_heads + h)];
                    }
                }
                for (int x : seen) ASSERT_EQ(x, 1);
            }
    // Beyond segment_rows keys: with fewer (token, heads) pairs than threads each segment is an item (split), and
    // the items cover every (token, head, segment) once, their partials inside shared_partials(); otherwise an item
    // per pair, its segments' partials after its scores in the thread's scratch.
    for (int32_t n_tokens : {1, 2, 64})
        for (int threads : {1, 2, 7}) {
            SCOPED_TRACE(std::to_string(n_tokens) + " tokens, " + std::to_string(threads) + " threads");
            const int64_t n_positions = 2000;
            const strata::cpu::attention_items items(n_tokens, 8, 2, 32, n_positions, threads, 1 << 15);
            ASSERT_EQ(items.segments, 4);
            EXPECT_EQ(items.split, items.n_pairs() < threads);
            const int64_t pf = strata::cpu::partial_floats(items.per_item, 32);
            if (!items.split) {
                EXPECT_EQ(items.n_items, items.n_pairs());
                EXPECT_EQ(items.scores_per_thread(),
                          items.block * (strata::cpu::segment_rows * items.per_item + items.segments * pf));
                continue;
            }
            ASSERT_EQ(items.block, 1); // a split op's pairs are single tokens
            std::vector<int> seen(size_t(n_tokens) * 8 * 4, 0);
            for (int64_t i = 0; i < items.n_items; ++i) {
                const int64_t g = items.segment(i);
                ASSERT_LT(g, items.segments);
                EXPECT_LE((items.pair(i) * items.segments + g + 1) * pf, items.shared_partials());
                const strata::cpu::head_chunk c = items.chunk(i, 32);
                for (int32_t h = items.first_head(i); h < items.first_head(i) + c.n_heads; ++h)
                    ++seen[size_t((items.first_token(i) * 8 + h) * 4 + g)];
            }
            for (int x : seen) ASSERT_EQ(x, 1);
        }
}
