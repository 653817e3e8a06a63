// The CUDA plugin's kernels and launchers (kernels_*.cuh), run on the host under cuda_host_emulation.hpp, against
// the same references as the GPU tests: a float64 product for matmul, the CPU device for the other ops, contiguous
// attention for paged attention. Runs on every machine. It checks the kernels' indexing, tiling edges, reductions
// and barriers; it says nothing about how they behave on real hardware (see cuda_host_emulation.hpp).
#include "cuda_host_emulation.hpp"

#include "kernels_attention.cuh"
#include "kernels_elementwise.cuh"
#include "kernels_matmul.cuh"
#include "kernels_moe.cuh"

#include "cuda_test_support.hpp"

#include <strata/device_args.hpp>
#include <strata/float16.hpp>
#include <strata/float8.hpp>
#include <strata/kv_layout.hpp>
#include <strata/kv_q8_0.hpp>
#include "sanitizer_build.hpp"

namespace {

using namespace cuda_test;
namespace cu = strata::cuda;

// The emulator runs a block's threads as fibers on one OS thread, switching stacks with _setjmp/_longjmp, which
// ThreadSanitizer cannot follow (its shadow stack overflows); with its fiber API it can, at minutes per test, and
// finds nothing: there is one thread. The plain and the ASan+UBSan builds run these.
class CudaEmulatedKernels : public ::testing::Test {
  protected:
    void SetUp() override {
        if (strata::testing::under_thread_sanitizer)
            GTEST_SKIP() << "single-threaded stack-switching emulation: not a ThreadSanitizer subject (runs in the "
                            "plain and ASan+UBSan builds)";
    }
};

device_ptr cpu_device() {
    strata_status st{};
    device_ptr dev = create_device(loaded().cpu, &st);
    EXPECT_NE(dev, nullptr) << st.message;
    return dev;
}

TEST_F(CudaEmulatedKernels, MatmulOfEveryFormatMatchesFloat64) {
    for (uint32_t type : {cu::weight_f32, cu::weight_f16, cu::weight_bf16, cu::weight_q8_0, cu::weight_q4_0,
                          cu::weight_q4_1, cu::weight_q5_0, cu::weight_q5_1, cu::weight_iq4_nl, cu::weight_q2_k,
                          cu::weight_q3_k, cu::weight_q4_k, cu::weight_q5_k, cu::weight_q6_k, cu::weight_iq4_xs,
                          cu::weight_q4_g128, cu::weight_q8_g32}) {
        const strata_quant_desc *q = loaded().quant(type);
        ASSERT_NE(q, nullptr) << loaded().load_error;
        std::vector<std::pair<int64_t, int64_t>> shapes = {{67, 256}, {130, 512}};
        if (q->block_elems <= 32) shapes.push_back({1, 64});
        if (q->block_elems == 1) shapes.push_back({45, 100}); // a partial 32-column step in the tiled kernel
        for (const auto &[rows, cols] : shapes) {
            const quantized_matrix m = quantize(*q, random_floats(static_cast<size_t>(rows * cols), 11), rows, cols);
            const cu::weight_ref w{m.bytes.data(), rows, cols, m.row_bytes, type};
            // Under AddressSanitizer (about 15x slower here) the larger shape, whose extra work is more column blocks
            // and row tiles of the same kernels, takes one decode and the smallest tiled batch; the smaller shape takes
            // all, several token tiles with a partial one included.
            const bool short_list = strata::testing::under_address_sanitizer && rows > 100;
            for (int32_t n_tokens : {1, 3, 8, 9, 70}) {
                if (short_list && n_tokens != 1 && n_tokens != 9) continue;
                SCOPED_TRACE(testing::Message() << "type " << type << ", " << rows << "x" << cols << ", " << n_tokens
                                                << " tokens");
                const auto x = random_floats(static_cast<size_t>(n_tokens * cols), 12, -2.0f, 2.0f);
                const auto want = reference_product(m.dequantized, x, rows, cols, n_tokens);
                std::vector<float> y(static_cast<size_t>(rows * n_tokens), NAN);
                ASSERT_EQ(cu::launch_matmul(w, x.data(), n_tokens, y.data(), nullptr), cudaSuccess);
                EXPECT_LT(normwise_error(y, want), 1e-5);
                if (n_tokens > cu::matvec_max_tokens) continue; // the tiled kernel takes any alignment
                // Activations one float off 16-byte alignment: decode batches take the one-warp-per-row kernel.
                std::vector<float> shifted(x.size() + 1);
                std::copy(x.begin(), x.end(), shifted.begin() + 1);
                std::fill(y.begin(), y.end(), NAN);
                ASSERT_EQ(cu::launch_matmul(w, shifted.data() + 1, n_tokens, y.data(), nullptr), cudaSuccess);
                EXPECT_LT(normwise_error(y, want), 1e-5) << "unaligned activations";
            }
        }
    }
}

TEST_F(CudaEmulatedKernels, EmbeddingRowsEqualTheReference) {
    for (uint32_t type : {cu::weight_f32, cu::weight_f16, cu::weight_bf16, cu::weight_q8_0, cu::weight_q4_0,
                          cu::weight_q4_1, cu::weight_q5_0, cu::weight_q5_1, cu::weight_iq4_nl, cu::weight_q2_k,
                          cu::weight_q3_k, cu::weight_q4_k, cu::weight_q5_k, cu::weight_q6_k, cu::weight_iq4_xs}) {
        const strata_quant_desc *q = loaded().quant(type);
        ASSERT_NE(q, nullptr);
        const int64_t rows = 50, cols = q->block_elems == 256 ? 512 : 320;
        const quantized_matrix m = quantize(*q, random_floats(static_cast<size_t>(rows * cols), 21, -4, 4), rows, cols);
        const std::vector<int32_t> tokens = {3, 0, 49, 3, 17};
        const auto n = static_cast<int32_t>(tokens.size());
        std::vector<float> out(static_cast<size_t>(n * cols), NAN);
        ASSERT_EQ(cu::launch_embedding({m.bytes.data(), rows, cols, m.row_bytes, type}, tokens.data(), n, out.data(),
                                       nullptr),
                  cudaSuccess);
        for (int32_t t = 0; t < n; ++t)
            for (int64_t k = 0; k < cols; ++k)
                ASSERT_EQ(out[static_cast<size_t>(t * cols + k)],
                          m.dequantized[static_cast<size_t>(tokens[static_cast<size_t>(t)] * cols + k)])
                    << "type " << type << " token " << t << " col " << k;
    }
}

// The gather before an act-order weight's matmul (ABI 1.19): out[t][j] = x[t][order[j]] for every token, across
// the grid-stride loop's blocks; an entry outside the columns gives NaN rather than a read elsewhere.
TEST_F(CudaEmulatedKernels, GatherColumnsFollowsTheInputOrder) {
    const int32_t n_rows = 3;
    const int64_t n_cols = 1000;
    const auto x = random_floats(static_cast<size_t>(n_rows * n_cols), 21);
    std::vector<int32_t> order(static_cast<size_t>(n_cols));
    for (int64_t j = 0; j < n_cols; ++j) order[static_cast<size_t>(j)] = static_cast<int32_t>((j * 337 + 11) % n_cols);
    std::vector<float> out(x.size(), 0.0f);
    ASSERT_EQ(cu::launch_gather_columns(x.data(), order.data(), n_rows, n_cols, out.data(), nullptr), cudaSuccess);
    for (int32_t r = 0; r < n_rows; ++r)
        for (int64_t j = 0; j < n_cols; ++j)
            ASSERT_EQ(out[r * n_cols + j], x[r * n_cols + order[static_cast<size_t>(j)]]) << r << " " << j;
    order[3] = -1;
    ASSERT_EQ(cu::launch_gather_columns(x.data(), order.data(), n_rows, n_cols, out.data(), nullptr), cudaSuccess);
    EXPECT_TRUE(std::isnan(out[3]));
    EXPECT_TRUE(std::isnan(out[n_cols + 3]));
}

TEST_F(CudaEmulatedKernels, RowOpsMatchTheCpuDevice) {
    device_ptr cpu = cpu_device();
    ASSERT_NE(cpu, nullptr);
    const strata_device_desc &c = *loaded().cpu;
    strata_status st{};

    for (const auto &[n_tokens, dim] : {std::pair<int32_t, int32_t>{5, 2048}, {3, 100}}) {
        auto x = random_floats(static_cast<size_t>(n_tokens * dim), 31, -3.0f, 3.0f);
        const auto w = random_floats(static_cast<size_t>(dim), 32, 0.5f, 1.5f);
        std::vector<float> want(x.size());
        ASSERT_EQ(c.rms_norm(cpu.get(), x.data(), w.data(), n_tokens, dim, 1e-5f, want.data(), &st), STRATA_OK);
        ASSERT_EQ(cu::launch_rms_norm(x.data(), w.data(), n_tokens, dim, 1e-5f, x.data(), nullptr), cudaSuccess);
        EXPECT_LT(normwise_error(x, want), 1e-5) << "rms_norm " << n_tokens << " x " << dim;
    }

    const std::vector<int32_t> positions = {0, 1, 7, 511, 4000};
    const auto n_pos = static_cast<int32_t>(positions.size());
    for (const int32_t mode : {STRATA_ROPE_PAIRS, STRATA_ROPE_NEOX})
        for (const auto &[head_dim, rot_dims] : {std::pair<int32_t, int32_t>{64, 64}, {128, 32}}) {
            const int32_t n_heads = 3;
            auto x = random_floats(static_cast<size_t>(n_pos * n_heads * head_dim), 41, -2.0f, 2.0f);
            auto want = x;
            ASSERT_EQ(c.rope(cpu.get(), want.data(), n_pos, n_heads, head_dim, rot_dims, positions.data(), 10000.0f,
                             mode, &st),
                      STRATA_OK);
            const float theta_scale = std::pow(10000.0f, -2.0f / static_cast<float>(rot_dims));
            ASSERT_EQ(cu::launch_rope(x.data(), n_pos, n_heads, head_dim, rot_dims, positions.data(), theta_scale, mode,
                                      nullptr, nullptr, cu::rope_terms{1.0f, 0.0f, 0.0f, 1.0f, 1.0f}),
                      cudaSuccess);
            EXPECT_LT(normwise_error(x, want), 1e-5) << "rope mode " << mode << " rot_dims " << rot_dims;
            // rope_ext (ABI 1.11): frequency factors (Llama 3.1's rope_freqs) and linear scaling.
            const auto factors = random_floats(static_cast<size_t>(rot_dims / 2), 42, 1.0f, 8.0f);
            x = random_floats(static_cast<size_t>(n_pos * n_heads * head_dim), 43, -2.0f, 2.0f);
            want = x;
            ASSERT_EQ(c.rope_ext(cpu.get(), want.data(), n_pos, n_heads, head_dim, rot_dims, positions.data(), 10000.0f,
                                 mode, 0.25f, factors.data(), &st),
                      STRATA_OK);
            ASSERT_EQ(cu::launch_rope(x.data(), n_pos, n_heads, head_dim, rot_dims, positions.data(), theta_scale, mode,
                                      nullptr, factors.data(), cu::rope_terms{0.25f, 0.0f, 0.0f, 1.0f, 1.0f}),
                      cudaSuccess);
            EXPECT_LT(normwise_error(x, want), 1e-5) << "rope_ext mode " << mode << " rot_dims " << rot_dims;
            // rope_scaled (ABI 1.13): YaRN's ramp and magnitude, and LongRoPE's attn_factor, through the op (so the
            // host-side terms are the device's own).
            for (const float ext : {0.0f, 1.0f}) {
                strata_rope_args ra = strata::plugin::rope_ext_args(n_pos, n_heads, head_dim, rot_dims,
                                                                    positions.data(), 10000.0f, mode, 0.25f,
                                                                    ext != 0.0f ? nullptr : factors.data());
                ra.attn_factor = 1.19f;
                ra.ext_factor = ext;
                ra.corr_low = 3.0f;
                ra.corr_high = static_cast<float>(rot_dims / 2 - 4);
                x = random_floats(static_cast<size_t>(n_pos * n_heads * head_dim), 44, -2.0f, 2.0f);
                want = x;
                ASSERT_EQ(c.rope_scaled(cpu.get(), want.data(), &ra, &st), STRATA_OK) << st.message;
                const float mscale = ext != 0.0f ? 1.19f * (1.0f + 0.1f * std::log(1.0f / 0.25f)) : 1.19f;
                ASSERT_EQ(cu::launch_rope(x.data(), n_pos, n_heads, head_dim, rot_dims, positions.data(), theta_scale,
                                          mode, nullptr, ra.freq_factors,
                                          cu::rope_terms{0.25f, ext, ra.corr_low,
                                                         std::max(0.001f, ra.corr_high - ra.corr_low), mscale}),
                          cudaSuccess);
                EXPECT_EQ(x, want) << "rope_scaled mode " << mode << " rot_dims " << rot_dims << " ext " << ext;
            }
        }

    const int64_t n = 10007;
    const auto g = random_floats(static_cast<size_t>(n), 61, -6.0f, 6.0f);
    const auto u = random_floats(static_cast<size_t>(n), 62, -2.0f, 2.0f);
    std::vector<float> got(g.size()), want(g.size());
    ASSERT_EQ(cu::launch_swiglu(g.data(), u.data(), n, got.data(), nullptr), cudaSuccess);
    ASSERT_EQ(c.swiglu(cpu.get(), g.data(), u.data(), n, want.data(), &st), STRATA_OK);
    EXPECT_LT(normwise_error(got, want), 1e-5) << "swiglu";
    ASSERT_EQ(cu::launch_add(g.data(), u.data(), n, got.data(), nullptr), cudaSuccess);
    ASSERT_EQ(c.add(cpu.get(), g.data(), u.data(), n, want.data(), &st), STRATA_OK);
    EXPECT_EQ(got, want) << "add";
    // ABI 1.14: scale, geglu, softcap, bit-equal to the CPU device (the same float steps; host tanhf here).
    ASSERT_EQ(cu::launch_scale(g.data(), n, 3.5f, got.data(), nullptr), cudaSuccess);
    ASSERT_EQ(c.scale(cpu.get(), g.data(), n, 3.5f, want.data(), &st), STRATA_OK);
    EXPECT_EQ(got, want) << "scale";
    ASSERT_EQ(cu::launch_geglu(g.data(), u.data(), n, got.data(), nullptr), cudaSuccess);
    ASSERT_EQ(c.geglu(cpu.get(), g.data(), u.data(), n, want.data(), &st), STRATA_OK);
    EXPECT_EQ(got, want) << "geglu";
    ASSERT_EQ(cu::launch_softcap(g.data(), n, 5.0f, got.data(), nullptr), cudaSuccess);
    ASSERT_EQ(c.softcap(cpu.get(), g.data(), n, 5.0f, want.data(), &st), STRATA_OK);
    EXPECT_EQ(got, want) << "softcap";
    // add_rows (ABI 1.12): a bias row added to every token, in place as the model calls it.
    {
        const int32_t n_rows = 7, n_cols = 1001;
        auto x = random_floats(static_cast<size_t>(n_rows * n_cols), 64, -4.0f, 4.0f);
        const auto bias = random_floats(static_cast<size_t>(n_cols), 65, -1.0f, 1.0f);
        std::vector<float> expect(x.size());
        ASSERT_EQ(c.add_rows(cpu.get(), x.data(), bias.data(), n_rows, n_cols, expect.data(), &st), STRATA_OK);
        ASSERT_EQ(cu::launch_add_rows(x.data(), bias.data(), n_rows, n_cols, x.data(), nullptr), cudaSuccess);
        EXPECT_EQ(x, expect) << "add_rows";
    }

    const int32_t rows = 3, cols = 5000;
    auto logits = random_floats(static_cast<size_t>(rows * cols), 63, -10.0f, 10.0f);
    auto probs = logits;
    ASSERT_EQ(cu::launch_softmax(probs.data(), rows, cols, nullptr), cudaSuccess);
    ASSERT_EQ(c.softmax(cpu.get(), logits.data(), rows, cols, &st), STRATA_OK);
    EXPECT_LT(normwise_error(probs, logits), 1e-5) << "softmax";
}

// ABI 1.16's mixture-of-experts steps: routing with the CPU device's ids (and its weights up to the last bits of the
// exponential), matmul_id's every slot equal bit for bit to a 1-token matmul over the slot's expert (both decode
// kernels: aligned and unaligned activations; a slot whose id is out of range left unwritten), combine and the
// shared expert's gate bit-equal to the CPU device.
TEST_F(CudaEmulatedKernels, MixtureOfExpertsStepsMatchTheCpuDevice) {
    device_ptr cpu = cpu_device();
    ASSERT_NE(cpu, nullptr);
    const strata_device_desc &c = *loaded().cpu;
    strata_status st{};
    for (const auto &[n_tokens, n_expert, k] : {std::tuple<int32_t, int32_t, int32_t>{5, 8, 2}, {3, 60, 4}})
        for (const int32_t normalize : {0, 1}) {
            const auto logits = random_floats(static_cast<size_t>(n_tokens * n_expert), 71, -4.0f, 4.0f);
            const auto slots = static_cast<size_t>(n_tokens * k);
            std::vector<int32_t> ids(slots, -1), want_ids(slots, -2);
            std::vector<float> weights(slots, NAN), want_weights(slots, NAN);
            strata_moe_route_args r{sizeof(strata_moe_route_args), n_tokens, n_expert, k, normalize,
                                    logits.data(), want_ids.data(), want_weights.data()};
            ASSERT_EQ(c.moe_route(cpu.get(), &r, &st), STRATA_OK) << st.message;
            ASSERT_EQ(cu::launch_moe_route(logits.data(), n_tokens, n_expert, k, normalize, ids.data(), weights.data(),
                                           nullptr),
                      cudaSuccess);
            EXPECT_EQ(ids, want_ids) << n_expert << " experts, normalize " << normalize;
            EXPECT_LT(normwise_error(weights, want_weights), 1e-6) << n_expert << " experts, normalize " << normalize;
        }

    const int32_t n_expert = 4, n_tokens = 3, k = 2;
    const std::vector<int32_t> ids = {2, 0, 3, 2, 1, 9}; // the last slot's id is out of range: left unwritten
    for (uint32_t type : {cu::weight_f32, cu::weight_q8_0, cu::weight_q4_k}) {
        const strata_quant_desc *q = loaded().quant(type);
        ASSERT_NE(q, nullptr);
        const int64_t rpe = 37, cols = 256;
        const quantized_matrix m =
            quantize(*q, random_floats(static_cast<size_t>(n_expert * rpe * cols), 72), n_expert * rpe, cols);
        const cu::weight_ref w{m.bytes.data(), n_expert * rpe, cols, m.row_bytes, type};
        for (const int32_t per_slot : {0, 1})
            for (const size_t shift : {size_t{0}, size_t{1}}) { // one float off 16-byte alignment: the warp kernel
                SCOPED_TRACE(testing::Message() << "type " << type << ", x per slot " << per_slot << ", shift " << shift);
                const int32_t n_x = per_slot != 0 ? n_tokens * k : n_tokens;
                const auto x0 = random_floats(static_cast<size_t>(n_x * cols) + 1, 73, -2.0f, 2.0f);
                const float *x = x0.data() + shift;
                std::vector<float> y(static_cast<size_t>(n_tokens * k * rpe), NAN);
                ASSERT_EQ(cu::launch_matmul_id(w, n_expert, ids.data(), n_tokens, k, x, per_slot, y.data(), nullptr),
                          cudaSuccess);
                for (int32_t s = 0; s + 1 < n_tokens * k; ++s) {
                    const int32_t e = ids[static_cast<size_t>(s)];
                    const cu::weight_ref expert{m.bytes.data() + e * rpe * m.row_bytes, rpe, cols, m.row_bytes, type};
                    std::vector<float> want(static_cast<size_t>(rpe), NAN);
                    const float *xs = x + (per_slot != 0 ? s : s / k) * cols;
                    ASSERT_EQ(cu::launch_matmul(expert, xs, 1, want.data(), nullptr), cudaSuccess);
                    EXPECT_TRUE(std::equal(want.begin(), want.end(), y.begin() + s * rpe)) << "slot " << s;
                }
                EXPECT_TRUE(std::all_of(y.end() - rpe, y.end(), [](float v) { return std::isnan(v); }))
                    << "the slot with a bad id was written";
            }
    }

    const int32_t dim = 300;
    const auto ys = random_floats(static_cast<size_t>(n_tokens * k * dim), 74, -3.0f, 3.0f);
    const auto cw = random_floats(static_cast<size_t>(n_tokens * k), 75, 0.0f, 1.0f);
    std::vector<float> got(static_cast<size_t>(n_tokens * dim), NAN), want(got.size(), NAN);
    ASSERT_EQ(cu::launch_moe_combine(ys.data(), cw.data(), n_tokens, k, dim, got.data(), nullptr), cudaSuccess);
    ASSERT_EQ(c.moe_combine(cpu.get(), ys.data(), cw.data(), n_tokens, k, dim, want.data(), &st), STRATA_OK);
    EXPECT_EQ(got, want) << "moe_combine";
    const auto gate = random_floats(static_cast<size_t>(n_tokens), 76, -5.0f, 5.0f);
    got = random_floats(got.size(), 77);
    want = got;
    ASSERT_EQ(cu::launch_sigmoid_gate_add(ys.data(), gate.data(), n_tokens, dim, got.data(), nullptr), cudaSuccess);
    ASSERT_EQ(c.sigmoid_gate_add(cpu.get(), ys.data(), gate.data(), n_tokens, dim, want.data(), &st), STRATA_OK);
    EXPECT_EQ(got, want) << "sigmoid_gate_add";
}

TEST_F(CudaEmulatedKernels, AttentionMatchesTheCpuDevice) {
    device_ptr cpu = cpu_device();
    ASSERT_NE(cpu, nullptr);
    strata_status st{};
    for (const attention_case c : {attention_case{1, 8, 2, 64, 40}, attention_case{5, 4, 4, 128, 0},
                                   attention_case{3, 6, 3, 80, 37}, attention_case{1, 2, 1, 256, 1000}}) {
        SCOPED_TRACE(testing::Message() << c.n_tokens << " tokens, " << c.n_heads << "/" << c.n_kv_heads
                                        << " heads, head_dim " << c.head_dim << ", from " << c.first_pos);
        const attention_data d = make_attention_data(c, 51);
        std::vector<float> want(d.q.size());
        const strata_attention_args a = attention_args(c, d, want.data());
        ASSERT_EQ(loaded().cpu->attention(cpu.get(), &a, &st), STRATA_OK) << st.message;
        const cu::attention_shape shape{c.n_tokens, c.n_heads, c.n_kv_heads, c.head_dim, a.scale};
        // out aliasing q, as the engine may do
        std::vector<float> q = d.q;
        ASSERT_EQ(cu::launch_attention(shape, d.positions.data(), q.data(), d.k.data(), d.v.data(), c.stride(),
                                       q.data(), nullptr),
                  cudaSuccess);
        EXPECT_LT(normwise_error(q, want), 1e-5);
        // ABI 1.14: soft-capping and a sliding window, as the CPU device applies them.
        for (const auto &[softcap, window] : {std::pair<float, int32_t>{2.0f, 0}, {0.0f, 5}, {1.5f, 17}}) {
            strata_attention_args b = attention_args(c, d, want.data());
            b.softcap = softcap;
            b.window = window;
            ASSERT_EQ(loaded().cpu->attention(cpu.get(), &b, &st), STRATA_OK) << st.message;
            const cu::attention_shape terms{c.n_tokens, c.n_heads, c.n_kv_heads, c.head_dim, a.scale, softcap, window};
            std::vector<float> got(d.q.size());
            ASSERT_EQ(cu::launch_attention(terms, d.positions.data(), d.q.data(), d.k.data(), d.v.data(), c.stride(),
                                           got.data(), nullptr),
                      cudaSuccess);
            EXPECT_LT(normwise_error(got, want), 1e-5) << "softcap " << softcap << " window " << window;
        }
    }
}

// kv_store into blocks spread over two pools, then paged attention over them equals contiguous attention bit for
// bit (same kernel template, same order of operations): for a float32 cache over the same rows, for a float16,
// bfloat16, fp8_e4m3 or fp8_e5m2 cache (ABI 1.20) or a q8_0 cache (1.23) over the rows rounded to that type (the
// stored bits are the SDK's rounding, q8_0's groups its quantizer's).
TEST_F(CudaEmulatedKernels, PagedAttentionEqualsContiguousBitForBit) {
    constexpr int32_t block_size = 4, n_kv_heads = 2, head_dim = 32, kv_dim = n_kv_heads * head_dim, n_heads = 4;
    for (const uint32_t type : {uint32_t{STRATA_KV_F32}, uint32_t{STRATA_KV_F16}, uint32_t{STRATA_KV_BF16},
                                uint32_t{STRATA_KV_FP8_E4M3}, uint32_t{STRATA_KV_FP8_E5M2}, uint32_t{STRATA_KV_Q8_0}}) {
        SCOPED_TRACE("kv_type " + std::to_string(type));
        const uint64_t element = strata::kv_layout::group_bytes(type); // one value's bytes but for q8_0
        const uint64_t block_bytes = strata::kv_layout::block_bytes(2, block_size, kv_dim, type); // layer 1 tested
        const uint64_t layer_offset = strata::kv_layout::layer_offset(1, block_size, kv_dim, type);
        const size_t block_floats = block_bytes / sizeof(float);
        const std::vector<int32_t> seq_len = {9, 4};
        const std::vector<int32_t> seq_block_start = {0, 3, 4};
        std::vector<float> pool_a(4 * block_floats, -1.0f), pool_b(4 * block_floats, -1.0f);
        // Blocks out of order and across pools.
        const std::vector<uint64_t> block_base = {reinterpret_cast<uint64_t>(pool_b.data() + 2 * block_floats),
                                                  reinterpret_cast<uint64_t>(pool_a.data()),
                                                  reinterpret_cast<uint64_t>(pool_b.data()),
                                                  reinterpret_cast<uint64_t>(pool_a.data() + 3 * block_floats)};
        const cu::paged_layout layout{seq_block_start.data(), block_base.data(), block_size, kv_dim, layer_offset,
                                      type};
        auto rounded = [&](float x) {
            if (type == STRATA_KV_F16) return strata::float16::fp16_to_fp32(strata::float16::fp32_to_fp16(x));
            if (type == STRATA_KV_BF16) return strata::float16::bf16_to_fp32(strata::float16::fp32_to_bf16(x));
            if (type == STRATA_KV_FP8_E4M3) return strata::float8::e4m3_to_fp32(strata::float8::fp32_to_e4m3(x));
            if (type == STRATA_KV_FP8_E5M2) return strata::float8::e5m2_to_fp32(strata::float8::fp32_to_e5m2(x));
            return x;
        };
        // Rows of kv_dim values as the cache gives them back: element by element, or (q8_0) group by group.
        auto rounded_rows = [&](std::vector<float> rows) {
            for (size_t r = 0; r < rows.size(); r += kv_dim) {
                if (type != STRATA_KV_Q8_0) {
                    for (size_t i = r; i < r + kv_dim; ++i) rows[i] = rounded(rows[i]);
                    continue;
                }
                for (size_t g = r; g < r + kv_dim; g += 32) {
                    strata::kv_q8_0::group q{};
                    strata::kv_q8_0::quantize(rows.data() + g, &q);
                    for (int i = 0; i < 32; ++i) rows[g + size_t(i)] = strata::kv_q8_0::value(q, i);
                }
            }
            return rows;
        };
        // One stored element's value.
        auto stored = [&](const unsigned char *p) {
            float f = 0;
            uint16_t h = 0;
            switch (type) {
            case STRATA_KV_F32: std::memcpy(&f, p, 4); return f;
            case STRATA_KV_F16: std::memcpy(&h, p, 2); return strata::float16::fp16_to_fp32(h);
            case STRATA_KV_BF16: std::memcpy(&h, p, 2); return strata::float16::bf16_to_fp32(h);
            case STRATA_KV_FP8_E4M3: return strata::float8::e4m3_to_fp32(*p);
            default: return strata::float8::e5m2_to_fp32(*p);
            }
        };

        std::vector<std::vector<float>> k, v;
        std::vector<int32_t> token_seq, positions;
        std::vector<float> k_rows, v_rows;
        for (size_t s = 0; s < seq_len.size(); ++s) {
            k.push_back(random_floats(static_cast<size_t>(seq_len[s] * kv_dim), 70 + static_cast<uint32_t>(s), -2, 2));
            v.push_back(random_floats(static_cast<size_t>(seq_len[s] * kv_dim), 80 + static_cast<uint32_t>(s)));
            for (int32_t p = 0; p < seq_len[s]; ++p) {
                token_seq.push_back(static_cast<int32_t>(s));
                positions.push_back(p);
                k_rows.insert(k_rows.end(), k[s].begin() + p * kv_dim, k[s].begin() + (p + 1) * kv_dim);
                v_rows.insert(v_rows.end(), v[s].begin() + p * kv_dim, v[s].begin() + (p + 1) * kv_dim);
            }
        }
        ASSERT_EQ(cu::launch_kv_store(static_cast<int32_t>(token_seq.size()), token_seq.data(), positions.data(),
                                      layout, k_rows.data(), v_rows.data(), nullptr),
                  cudaSuccess);
        // Slot 6 of sequence 0 is row 2 of its block 1 (block_base[1] = pool_a block 0).
        const auto *layer1 = reinterpret_cast<const unsigned char *>(pool_a.data()) + layer_offset;
        const uint64_t row_bytes = strata::kv_layout::row_bytes(kv_dim, type);
        for (int32_t g = 0; type == STRATA_KV_Q8_0 && g < kv_dim / 32; ++g) {
            strata::kv_q8_0::group want_k{}, want_v{};
            strata::kv_q8_0::quantize(k[0].data() + 6 * kv_dim + 32 * g, &want_k);
            strata::kv_q8_0::quantize(v[0].data() + 6 * kv_dim + 32 * g, &want_v);
            const unsigned char *kp = layer1 + 2 * row_bytes + uint64_t(g) * sizeof want_k;
            const unsigned char *vp = layer1 + strata::kv_layout::v_offset(block_size, kv_dim, type) + 2 * row_bytes +
                                      uint64_t(g) * sizeof want_v;
            ASSERT_EQ(std::memcmp(kp, &want_k, sizeof want_k), 0) << "K group " << g;
            ASSERT_EQ(std::memcmp(vp, &want_v, sizeof want_v), 0) << "V group " << g;
        }
        for (int32_t i = 0; type != STRATA_KV_Q8_0 && i < kv_dim; ++i) {
            const float want_k = rounded(k[0][size_t(6 * kv_dim + i)]), want_v = rounded(v[0][size_t(6 * kv_dim + i)]);
            const unsigned char *kp = layer1 + 2 * row_bytes + uint64_t(i) * element;
            const unsigned char *vp = layer1 + strata::kv_layout::v_offset(block_size, kv_dim, type) + 2 * row_bytes +
                                      uint64_t(i) * element;
            const float got_k = stored(kp), got_v = stored(vp);
            ASSERT_EQ(got_k, want_k) << "K element " << i;
            ASSERT_EQ(got_v, want_v) << "V element " << i;
        }
        EXPECT_EQ(pool_a[0], -1.0f) << "layer 0 must stay untouched";

        const std::vector<int32_t> q_seq = {0, 1, 0}, q_pos = {8, 3, 4};
        const auto n_q = static_cast<int32_t>(q_seq.size());
        const size_t q_row = static_cast<size_t>(n_heads) * head_dim;
        const auto q = random_floats(q_row * static_cast<size_t>(n_q), 90, -2.0f, 2.0f);
        std::vector<float> paged(q.size(), NAN);
        const cu::attention_shape shape{n_q, n_heads, n_kv_heads, head_dim, 0.17f};
        ASSERT_EQ(
            cu::launch_paged_attention(shape, q_seq.data(), q_pos.data(), layout, q.data(), paged.data(), nullptr),
            cudaSuccess);
        for (int32_t t = 0; t < n_q; ++t) {
            const size_t s = static_cast<size_t>(q_seq[static_cast<size_t>(t)]);
            const std::vector<float> rk = rounded_rows(k[s]), rv = rounded_rows(v[s]);
            std::vector<float> one(q_row, NAN);
            const cu::attention_shape one_shape{1, n_heads, n_kv_heads, head_dim, 0.17f};
            ASSERT_EQ(cu::launch_attention(one_shape, &q_pos[static_cast<size_t>(t)], q.data() + t * q_row, rk.data(),
                                           rv.data(), kv_dim, one.data(), nullptr),
                      cudaSuccess);
            EXPECT_EQ(std::memcmp(one.data(), paged.data() + t * q_row, q_row * sizeof(float)), 0) << "token " << t;
        }
    }
}

} // namespace
