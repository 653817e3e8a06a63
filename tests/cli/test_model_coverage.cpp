// A model file is run only when the model plugin uses all of it (core/engine/model_coverage.cpp). Of the three files
// that used to load and give wrong tokens from the first one without a word (issue #13), Q/K/V biases are refused with
// every unused tensor listed at once, and RoPE frequency factors, linear RoPE scaling, YaRN and LongRoPE now run
// (their tokens against llama.cpp: peer_llamacpp_greedy). A 1-layer model runs
// with default settings (prefetch_depth 2 reads ahead what there is).
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

// The completion token ids of `runtime --output json`, as text (empty when there are none).
std::string tokens(const std::string &out) {
    const size_t at = out.find("\"completion_tokens\"");
    return at == std::string::npos ? std::string() : out.substr(at, out.find(']', at) - at);
}

const char *const k_short = " --prompt \"one two three\" --max-tokens 16 --temperature 0 --ignore-eos --output json";
// Long enough for positions where RoPE variants' angles part.
const char *const k_long = " --prompt \"one two three four five six seven eight nine ten\" --max-tokens 24 "
                           "--temperature 0 --ignore-eos --output json";

// The greedy completion of `model` with `args` as text; a failed run fails the test and gives "".
std::string greedy(const std::string &model, const std::string &args) {
    const auto r = run_runtime("--model " + model + args);
    EXPECT_EQ(r.exit_code, 0) << r.all;
    EXPECT_FALSE(tokens(r.all).empty()) << r.all;
    return r.exit_code == 0 ? tokens(r.all) : std::string();
}

TEST(ModelCoverage, EveryUnusedTensorIsListedInOneMessage) {
    // Qwen2 has neither MLP biases nor RoPE frequency factors (llama.cpp refuses such a file too): seven tensors the
    // qwen2 family does not use, every one named.
    const std::string m =
        model_with("coverage-qwen2-mlp-bias-freqs.gguf", "--arch qwen2 --feature mlp-bias --feature rope-freqs");
    ASSERT_FALSE(m.empty()) << "make-model failed";
    const auto r = run_runtime("--model " + m + " --prompt hello --max-tokens 2");
    EXPECT_NE(r.exit_code, 0) << r.all;
    EXPECT_NE(r.all.find("does not use 7 part(s)"), std::string::npos) << r.all;
    EXPECT_NE(r.all.find("cannot run it correctly"), std::string::npos) << r.all;
    for (const char *name : {"blk.0.ffn_gate.bias", "blk.0.ffn_up.bias", "blk.1.ffn_down.bias", "rope_freqs.weight"})
        EXPECT_NE(r.all.find(std::string("tensor '") + name + "' ["), std::string::npos) << name << "\n" << r.all;
    EXPECT_EQ(r.all.find("attn_q.bias"), std::string::npos) << "qwen2 uses its Q/K/V biases\n" << r.all;
}

// Biases (Q/K/V, output, MLP) run where llama.cpp's llama reads them, and change the tokens.
TEST(ModelCoverage, LlamaBiasesRunAndChangeTheTokens) {
    const std::string plain = model_with("coverage-plain.gguf", "");
    const std::string biased = model_with("coverage-biases.gguf", "--feature qkv-bias --feature mlp-bias");
    ASSERT_FALSE(plain.empty() || biased.empty()) << "make-model failed";
    EXPECT_NE(greedy(plain, k_short), greedy(biased, k_short)) << "the biases changed no token";
}

TEST(ModelCoverage, Qwen2OutputBiasRunsAndALlamaOneIsRefused) {
    const std::string plain = model_with("coverage-qwen2.gguf", "--arch qwen2");
    const std::string biased = model_with("coverage-qwen2-output-bias.gguf", "--arch qwen2 --feature output-bias");
    const std::string llama = model_with("coverage-llama-output-bias.gguf", "--feature output-bias");
    ASSERT_FALSE(plain.empty() || biased.empty() || llama.empty()) << "make-model failed";
    EXPECT_NE(greedy(plain, k_short), greedy(biased, k_short)) << "output.bias changed no token";
    // llama.cpp's llama has no output bias (its loader refuses the extra tensor): neither runs it.
    const auto c = run_runtime("--model " + llama + " --prompt hello --max-tokens 2");
    EXPECT_NE(c.exit_code, 0) << c.all;
    EXPECT_NE(c.all.find("tensor 'output.bias' ["), std::string::npos) << c.all;
}

TEST(ModelCoverage, FusedQkvGivesTheTokensOfTheSeparateWeights) {
    // make-model draws a fused attn_qkv (and its bias) in the order of the separate tensors: the same weights, so the
    // loader's views must give the same tokens, bit for bit.
    const std::string separate = model_with("coverage-qkv-bias.gguf", "--feature qkv-bias");
    const std::string fused = model_with("coverage-fused-qkv-bias.gguf", "--feature qkv-bias --feature fused-qkv");
    ASSERT_FALSE(separate.empty() || fused.empty()) << "make-model failed";
    EXPECT_EQ(greedy(separate, k_short), greedy(fused, k_short));
}

TEST(ModelCoverage, RopeFrequencyFactorsAndLinearScalingRunAndChangeTheTokens) {
    const std::string plain = model_with("coverage-plain.gguf", "");
    const std::string freqs = model_with("coverage-rope-freqs.gguf", "--feature rope-freqs");
    const std::string linear = model_with("coverage-rope-linear.gguf", "--feature rope-scaling-linear");
    ASSERT_FALSE(plain.empty() || freqs.empty() || linear.empty()) << "make-model failed";
    // The same seed gives the same weights: only the RoPE differs, and it must show in the tokens (ignoring it did
    // not). The prompt is long enough for positions where the angles part.
    const std::string a = greedy(plain, k_long);
    EXPECT_NE(a, greedy(freqs, k_long)) << "rope_freqs.weight changed no token";
    EXPECT_NE(a, greedy(linear, k_long)) << "linear RoPE scaling changed no token";
}

TEST(ModelCoverage, YarnAndLongRopeRunAndChangeTheTokens) {
    const std::string plain = model_with("coverage-plain.gguf", "");
    const std::string yarn = model_with("coverage-rope-yarn.gguf", "--feature rope-scaling-yarn");
    ASSERT_FALSE(plain.empty() || yarn.empty()) << "make-model failed";
    EXPECT_NE(greedy(plain, k_long), greedy(yarn, k_long)) << "YaRN changed no token";
    // Phi-3's LongRoPE: the long factors when the context exceeds the original (64 of 128 here), the short ones
    // within it (which set, and that each equals llama.cpp's: DecoderLoad.RopeScaling*, peer_llamacpp_greedy); the
    // tokens differ between the two.
    const std::string phi3 = made_model("coverage-phi3-longrope.gguf",
                                        "--arch phi3 --dim 64 --layers 2 --heads 4 --kv-heads 2 --ff 128 --ctx 128 "
                                        "--type f32 --feature longrope");
    ASSERT_FALSE(phi3.empty()) << "make-model failed";
    EXPECT_NE(greedy(phi3, k_long), greedy(phi3, std::string(k_long) + " --max-model-len 64"))
        << "the factor set changed no token";
}

// Gemma's window, soft-caps and windowed layers' RoPE each change the tokens (that each equals llama.cpp's:
// peer_llamacpp_greedy), so none is read and then left unapplied.
TEST(ModelCoverage, GemmaWindowSoftCapsAndWindowedRopeChangeTheTokens) {
    const std::string gemma2 = "--arch gemma2 --dim 64 --layers 2 --heads 4 --kv-heads 2 --ff 128 --ctx 128 --type f32 ";
    const std::string base = made_model("coverage-gemma2.gguf", gemma2);
    const std::string window = made_model("coverage-gemma2-window.gguf", gemma2 + "--window 4");
    const std::string caps = made_model("coverage-gemma2-caps.gguf", gemma2 + "--attn-softcap 1 --final-softcap 2");
    ASSERT_FALSE(base.empty() || window.empty() || caps.empty()) << "make-model failed";
    const std::string a = greedy(base, k_long);
    EXPECT_NE(a, greedy(window, k_long)) << "a window of 4 changed no token";
    EXPECT_NE(a, greedy(caps, k_long)) << "soft-caps of 1 and 2 changed no token";
    // gemma3: the same weights with every layer windowed (pattern 0) at the windowed layers' base 10000 against the
    // global base 1e6 (a window of 64 beyond the text, so only the bases differ).
    const std::string gemma3 = "--arch gemma3 --dim 64 --layers 2 --heads 4 --kv-heads 2 --ff 128 --ctx 128 --type f32 "
                               "--window 64 --swa-pattern ";
    const std::string global = made_model("coverage-gemma3-global.gguf", gemma3 + "1");
    const std::string windowed = made_model("coverage-gemma3-windowed.gguf", gemma3 + "100");
    ASSERT_FALSE(global.empty() || windowed.empty()) << "make-model failed";
    EXPECT_NE(greedy(global, k_long), greedy(windowed, k_long)) << "the windowed layers' RoPE base changed no token";
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
