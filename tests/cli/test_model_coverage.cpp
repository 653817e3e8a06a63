// A model file is run only when the model plugin uses all of it (core/engine/model_coverage.cpp). The three files
// that used to load and give wrong tokens from the first one without a word (issue #13: RoPE frequency factors,
// Q/K/V biases, linear RoPE scaling) are refused with what is missing; the unused parts of a file are all listed at
// once. A 1-layer model runs with default settings (prefetch_depth 2 reads ahead what there is).
#include "made_model.hpp"
#include "runtime_process.hpp"

#include <gtest/gtest.h>

#include <string>

namespace {

using strata::testing::made_model;
using strata::testing::run_runtime;

// A small random-weight Llama with make-model's --feature list.
std::string model_with(const std::string &name, const std::string &features) {
    return made_model(name, "--dim 64 --layers 2 --heads 4 --kv-heads 2 --ff 128 --ctx 128 --type f32 " + features);
}

TEST(ModelCoverage, RopeFrequencyFactorsAreRefusedNotIgnored) {
    const std::string m = model_with("coverage-rope-freqs.gguf", "--feature rope-freqs");
    ASSERT_FALSE(m.empty()) << "make-model failed";
    const auto r = run_runtime("--model " + m + " --prompt hello --max-tokens 2");
    EXPECT_NE(r.exit_code, 0) << r.all;
    EXPECT_NE(r.all.find("does not use 1 part(s)"), std::string::npos) << r.all;
    EXPECT_NE(r.all.find("tensor 'rope_freqs.weight' [8] F32"), std::string::npos) << r.all;
    EXPECT_NE(r.all.find("cannot run it correctly"), std::string::npos) << r.all;
}

TEST(ModelCoverage, EveryUnusedTensorIsListedInOneMessage) {
    const std::string m = model_with("coverage-bias-freqs.gguf", "--feature qkv-bias --feature rope-freqs");
    ASSERT_FALSE(m.empty()) << "make-model failed";
    const auto r = run_runtime("--model " + m + " --prompt hello --max-tokens 2");
    EXPECT_NE(r.exit_code, 0) << r.all;
    // Three biases per layer for two layers, and the frequency factors.
    EXPECT_NE(r.all.find("does not use 7 part(s)"), std::string::npos) << r.all;
    for (const char *name : {"blk.0.attn_q.bias", "blk.0.attn_k.bias", "blk.1.attn_v.bias", "rope_freqs.weight"})
        EXPECT_NE(r.all.find(std::string("tensor '") + name + "'"), std::string::npos) << name << "\n" << r.all;
}

TEST(ModelCoverage, LinearRopeScalingIsRefusedWithItsFactor) {
    const std::string m = model_with("coverage-rope-linear.gguf", "--feature rope-scaling-linear");
    ASSERT_FALSE(m.empty()) << "make-model failed";
    const auto r = run_runtime("--model " + m + " --prompt hello --max-tokens 2");
    EXPECT_NE(r.exit_code, 0) << r.all;
    EXPECT_NE(r.all.find("RoPE scaling 'linear' (llama.rope.scaling.factor 4"), std::string::npos) << r.all;
}

TEST(ModelCoverage, AFileWithoutExtrasRunsAndAOneLayerModelRunsWithDefaults) {
    const std::string plain = model_with("coverage-plain.gguf", "");
    ASSERT_FALSE(plain.empty()) << "make-model failed";
    auto r = run_runtime("--model " + plain + " --prompt hello --max-tokens 2");
    EXPECT_EQ(r.exit_code, 0) << r.all;
    const std::string one = made_model("coverage-one-layer.gguf",
                                       "--dim 64 --layers 1 --heads 4 --kv-heads 2 --ff 128 --ctx 128 --type f32");
    ASSERT_FALSE(one.empty()) << "make-model failed";
    r = run_runtime("--model " + one + " --prompt hello --max-tokens 2");
    EXPECT_EQ(r.exit_code, 0) << r.all;
    EXPECT_EQ(r.all.find("prefetch_depth"), std::string::npos) << r.all;
}

} // namespace
