// The SDK example plugins (built in-tree from sdk/examples) are accepted by the host and actually work.
#include "plugin_host/registry.hpp"
#include "test_host.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace {

using strata::plugins::registry;
using strata::test::captured_host;

class SdkExamples : public ::testing::Test {
  protected:
    void SetUp() override {
        for (const char *path : {EXAMPLE_MODEL_ARCH, EXAMPLE_QUANT, EXAMPLE_DEVICE, EXAMPLE_TIER, EXAMPLE_FRONTEND}) {
            reg.load_file(path);
        }
    }
    captured_host host;
    registry reg{host.get()};
};

TEST_F(SdkExamples, AllKindsAreRegistered) {
    EXPECT_EQ(reg.list().size(), 5u);
    EXPECT_TRUE(reg.rejections().empty());
    EXPECT_EQ(reg.names(STRATA_KIND_MODEL_ARCH), std::vector<std::string>{"example_bigram"});
    EXPECT_EQ(reg.names(STRATA_KIND_QUANT), std::vector<std::string>{"example_f32"});
    EXPECT_TRUE(reg.find_device("example"));
    EXPECT_TRUE(reg.find_tier("example"));
    EXPECT_TRUE(reg.find_frontend("example"));
    EXPECT_EQ(reg.best_device().desc, reg.find_device("example").desc);
    // Optional slots the examples fill in are visible through STRATA_HAS_SLOT.
    EXPECT_TRUE(STRATA_HAS_SLOT(reg.find_tier("example").desc, map));
    EXPECT_FALSE(STRATA_HAS_SLOT(reg.find_model_arch_for("example_bigram").desc, tensor_count));
}

TEST_F(SdkExamples, TierStoresBytesAndChecksBounds) {
    auto tier_h = reg.find_tier("example");
    ASSERT_TRUE(tier_h);
    const strata_tier_desc *t = tier_h.desc;
    strata_tier_create_args args{sizeof args, host.get(), nullptr, 64};
    auto tier = strata::plugins::create_guarded(
        tier_h, [&](strata_status *st) { return t->create(&args, st); }, t->destroy);
    EXPECT_EQ(t->capacity(tier.get()), 64u);

    strata_status st{};
    uint64_t region = 0;
    ASSERT_EQ(t->region_alloc(tier.get(), 48, &region, &st), STRATA_OK) << st.message;
    const char text[] = "strata tier";
    ASSERT_EQ(t->write(tier.get(), region, 8, text, sizeof text, &st), STRATA_OK) << st.message;
    char back[sizeof text] = {};
    ASSERT_EQ(t->read(tier.get(), region, 8, back, sizeof back, &st), STRATA_OK) << st.message;
    EXPECT_STREQ(back, text);
    unsigned char first = 0xff;
    ASSERT_EQ(t->read(tier.get(), region, 0, &first, 1, &st), STRATA_OK);
    EXPECT_EQ(first, 0u); // zero_fill defaults on
    EXPECT_EQ(std::memcmp(static_cast<char *>(t->map(tier.get(), region)) + 8, text, sizeof text), 0);

    // Out of bounds, including offsets that would overflow.
    EXPECT_EQ(t->read(tier.get(), region, 40, back, 9, &st), STRATA_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(st.message).find("outside region"), std::string::npos) << st.message;
    EXPECT_EQ(t->write(tier.get(), region, UINT64_MAX, text, 2, &st), STRATA_ERR_INVALID_ARGUMENT);
    // Over the budget: 48 of 64 used.
    uint64_t second = 0;
    EXPECT_EQ(t->region_alloc(tier.get(), 17, &second, &st), STRATA_ERR_OUT_OF_MEMORY);
    EXPECT_EQ(second, 0u); // outputs untouched on error
    ASSERT_EQ(t->region_alloc(tier.get(), 16, &second, &st), STRATA_OK);
    // Freed regions return their bytes and their id is no longer valid.
    t->region_free(tier.get(), region);
    EXPECT_EQ(t->read(tier.get(), region, 0, back, 1, &st), STRATA_ERR_NOT_FOUND);
    EXPECT_EQ(t->region_alloc(tier.get(), 48, &region, &st), STRATA_OK) << st.message;
}

TEST_F(SdkExamples, FrontendGreetsWithModelName) {
    auto fe_h = reg.find_frontend("example");
    ASSERT_TRUE(fe_h);
    strata_engine_api api{};
    api.struct_size = sizeof api;
    api.model_name = [](strata_engine *) { return "tiny-test-model"; };
    strata_frontend_create_args args{sizeof args, host.get(), nullptr, &api, nullptr};
    auto fe = strata::plugins::create_guarded(
        fe_h, [&](strata_status *st) { return fe_h.desc->create(&args, st); }, fe_h.desc->destroy);
    strata_status st{};
    ::testing::internal::CaptureStdout();
    const int32_t rc = fe_h.desc->run(fe.get(), &st);
    const std::string out = ::testing::internal::GetCapturedStdout();
    EXPECT_EQ(rc, 0);
    EXPECT_EQ(out, "hello from frontend: tiny-test-model\n");
}

// A fake GGUF: two 3x2 F32 tensors, served through the model source accessors.
struct fake_model_file {
    std::vector<float> embd{1, 2, 3, 4, 5, 6};   // rows: token 0 = (1,2), 1 = (3,4), 2 = (5,6)
    std::vector<float> output{1, 0, 0, 1, 1, 1}; // logits = (h0, h1, h0 + h1)
    const strata_quant_desc *f32 = nullptr;

    static int32_t get_tensor(void *ctx, const char *name, strata_tensor_view *out) {
        auto *self = static_cast<fake_model_file *>(ctx);
        const std::vector<float> *data = std::strcmp(name, "token_embd.weight") == 0 ? &self->embd
                                         : std::strcmp(name, "output.weight") == 0   ? &self->output
                                                                                     : nullptr;
        if (data == nullptr) return 0;
        *out = strata_tensor_view{sizeof *out, 0, self->f32, data->data(), 3, 2, 2 * sizeof(float), name};
        return 1;
    }
};

TEST_F(SdkExamples, ModelArchRunsForwardOnExampleDeviceAndQuant) {
    auto arch = reg.find_model_arch_for("example_bigram");
    ASSERT_TRUE(arch);
    EXPECT_FALSE(reg.find_model_arch_for("llama"));
    auto quant = reg.find_quant_by_type(0);
    ASSERT_TRUE(quant);
    auto dev_h = reg.best_device();
    ASSERT_TRUE(dev_h);

    fake_model_file file;
    file.f32 = quant.desc;
    strata_model_source src{};
    src.struct_size = sizeof src;
    src.ctx = &file;
    src.get_u64 = [](void *, const char *, uint64_t *) -> int32_t { return 0; };
    src.get_f64 = [](void *, const char *, double *) -> int32_t { return 0; };
    src.get_str = [](void *, const char *, const char **) -> int32_t { return 0; };
    src.get_tensor = &fake_model_file::get_tensor;
    src.host = host.get();
    auto model = strata::plugins::create_guarded(
        arch, [&](strata_status *st) { return arch.desc->create(&src, st); }, arch.desc->destroy);
    strata_model_hparams hp{};
    arch.desc->get_hparams(model.get(), &hp);
    EXPECT_EQ(hp.n_vocab, 3);
    EXPECT_EQ(hp.n_embd, 2);

    strata_device_create_args dargs{sizeof dargs, host.get(), nullptr};
    auto dev = strata::plugins::create_guarded(
        dev_h, [&](strata_status *st) { return dev_h.desc->create(&dargs, st); }, dev_h.desc->destroy);

    const int32_t tokens[] = {0, 2};
    const int32_t positions[] = {0, 1};
    std::vector<unsigned char> workspace(arch.desc->workspace_bytes(model.get(), 2));
    float logits[3] = {};
    strata_forward_args fa{};
    fa.struct_size = sizeof fa;
    fa.device_ops = dev_h.desc;
    fa.device = dev.get();
    fa.tokens = tokens;
    fa.positions = positions;
    fa.n_tokens = 2;
    fa.workspace = workspace.data();
    fa.workspace_size = workspace.size();
    fa.logits = logits;
    strata_status st{};
    ASSERT_EQ(arch.desc->forward(model.get(), &fa, &st), STRATA_OK) << st.message;
    // Last token is 2 -> embedding (5, 6) -> logits (5, 6, 11).
    EXPECT_FLOAT_EQ(logits[0], 5.0f);
    EXPECT_FLOAT_EQ(logits[1], 6.0f);
    EXPECT_FLOAT_EQ(logits[2], 11.0f);
}

TEST_F(SdkExamples, DeviceAttentionMatchesHandComputedSoftmax) {
    auto dev_h = reg.find_device("example");
    strata_device_create_args dargs{sizeof dargs, host.get(), nullptr};
    auto dev = strata::plugins::create_guarded(
        dev_h, [&](strata_status *st) { return dev_h.desc->create(&dargs, st); }, dev_h.desc->destroy);
    // One head of dim 1; the query at position 1 sees keys (0, 1) with values (10, 20).
    const float q[] = {std::log(3.0f)};
    const float k[] = {0.0f, 1.0f};
    const float v[] = {10.0f, 20.0f};
    const int32_t pos[] = {1};
    float out[1] = {};
    strata_attention_args a{sizeof a, 1, 1, 1, 1, 1, pos, q, k, v, 1.0f, out};
    strata_status st{};
    ASSERT_EQ(dev_h.desc->attention(dev.get(), &a, &st), STRATA_OK) << st.message;
    // Scores (0, ln 3) -> weights (1/4, 3/4) -> 2.5 + 15.
    EXPECT_NEAR(out[0], 17.5f, 1e-4f);
}

} // namespace
