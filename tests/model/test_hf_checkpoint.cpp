// HF checkpoint folders end to end (tools/hf-export writes them from GGUFs): stories260K as an HF Llama checkpoint
// (Q/K in Hugging Face's rotate-half order, tokenizer.json built from tok512) gives run.c's reference text, and the
// same folder without the permutation does not (so the test proves the rotation, not two matching mistakes);
// sharded, untied and BF16 checkpoints and the Qwen2/Qwen3 mappings give the same tokens as the same weights in GGUF.
#include "engine_fixture.hpp"
#include "made_model.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace {

using namespace strata::testing;


std::string stories_hf(const std::string &name, const std::string &args) {
    const std::string dir = exported_hf(name, shared_path("models/stories260K-f32.gguf"), args);
    EXPECT_FALSE(dir.empty()) << "hf-export failed for " << name;
    return dir;
}

TEST(HfCheckpoint, StoriesAsAnHfLlamaCheckpointMatchesRunC) {
    const std::string ref = stories_reference_text();
    ASSERT_GT(ref.size(), 400u);
    auto e = make_engine(stories_hf("stories-hf", ""));
    const generation_result g = generate(*e, "", greedy(200));
    EXPECT_EQ(g.text, ref);
    // The prompt goes through tokenizer.json (BPE merges from tok512's scores): BOS + ▁Once ▁upon ▁a ▁time.
    const generation_result p = generate(*e, "Once upon a time", greedy(196));
    ASSERT_EQ(p.prompt.size(), 5u);
    EXPECT_EQ(p.prompt[0], 1);
    EXPECT_EQ("Once upon a time" + p.text, ref);
}

TEST(HfCheckpoint, WithoutTheQkPermutationTheSameCheckpointDoesNotMatch) {
    auto e = make_engine(stories_hf("stories-hf-unpermuted", "--no-permute"));
    const generation_result g = generate(*e, "", greedy(200));
    EXPECT_NE(g.text.substr(0, 60), stories_reference_text().substr(0, 60));
}

TEST(HfCheckpoint, ThreeShardsAndAnUntiedHeadMatchRunC) {
    const std::string dir = stories_hf("stories-hf-3-shards-untied", "--shards 3 --untie");
    ASSERT_TRUE(std::filesystem::exists(std::filesystem::path(dir) / "model-00003-of-00003.safetensors"));
    auto e = make_engine(dir);
    EXPECT_EQ(generate(*e, "", greedy(200)).text, stories_reference_text());
}

// Same weights, two formats: the tokens must be equal, and every position's logits (teacher-forced over the prompt
// and the generated text) equal within `rel_tol` of the largest logit. 0 is bit for bit: the matrices are the same
// bytes. Llama-family Q/K rows are in another order in each format (pairs or rotate-half), so each head's Q.K sums
// run in another order: a few float ulps; Gemma's norms, stored as w - 1, come back through a float add.
void expect_same_model(const std::string &gguf, const std::string &hf, const char *prompt, int32_t n,
                       double rel_tol = 0.0) {
    ASSERT_FALSE(gguf.empty());
    ASSERT_FALSE(hf.empty());
    auto a = make_engine(gguf);
    auto b = make_engine(hf);
    strata_sampling_params sp = greedy(n);
    sp.ignore_eos = 1; // random weights may pick EOS early; compare all n
    const generation_result ga = generate(*a, prompt, sp);
    const generation_result gb = generate(*b, prompt, sp);
    EXPECT_EQ(ga.prompt, gb.prompt) << "tokenizer.json and the GGUF vocabulary disagree";
    ASSERT_EQ(ga.tokens.size(), static_cast<size_t>(n));
    EXPECT_EQ(ga.tokens, gb.tokens) << hf;
    std::vector<int32_t> text = ga.prompt;
    text.insert(text.end(), ga.tokens.begin(), ga.tokens.end());
    const auto rows = static_cast<int32_t>(text.size());
    const size_t n_vocab = static_cast<size_t>(a->tokenizer().n_vocab());
    std::vector<float> la(static_cast<size_t>(rows) * n_vocab), lb(la.size());
    a->forward_logits(text.data(), rows, 0, la.data());
    b->forward_logits(text.data(), rows, 0, lb.data());
    double largest = 0, worst = 0;
    for (size_t i = 0; i < la.size(); ++i) {
        largest = std::max(largest, static_cast<double>(std::fabs(la[i])));
        worst = std::max(worst, static_cast<double>(std::fabs(la[i] - lb[i])));
    }
    std::printf("%s: logits differ by at most %.3g (largest |logit| %.3g)\n", hf.c_str(), worst, largest);
    EXPECT_LE(worst, rel_tol * largest) << hf;
}

TEST(HfCheckpoint, F16WeightsGiveTheSameTokensAsTheirGguf) {
    const std::string gguf = shared_path("models/stories260K-f16.gguf");
    expect_same_model(gguf, exported_hf("stories-hf-f16", gguf), "Lily and Ben went to the park", 120, 1e-4);
}

struct family_case {
    const char *name;
    const char *make_model_args;
    const char *export_args;
    double rel_tol = 0.0;
};

class HfFamilies : public ::testing::TestWithParam<family_case> {};

TEST_P(HfFamilies, GiveTheSameTokensAsTheSameWeightsInGguf) {
    const family_case &c = GetParam();
    const std::string gguf = made_model(std::string("hf-family-") + c.name + ".gguf",
                                        std::string(c.make_model_args) +
                                            " --dim 64 --layers 6 --heads 4 --kv-heads 2 --ff 128 --ctx 256 "
                                            "--weight-scale 3 --vocab-from " +
                                            shared_path("models/stories260K-f32.gguf") + " 2>/dev/null");
    const std::string hf = exported_hf(std::string("hf-family-") + c.name, gguf, c.export_args);
    expect_same_model(gguf, hf, "Once upon a time", 60, c.rel_tol);
}

INSTANTIATE_TEST_SUITE_P(Decoder, HfFamilies,
                         ::testing::Values(family_case{"llama_bf16", "--arch llama --type bf16", "--shards 2", 1e-4},
                                           family_case{"qwen2_f16", "--arch qwen2 --type f16", ""},
                                           family_case{"qwen3_f16", "--arch qwen3 --type f16 --head-dim 32", "--untie"},
                                           family_case{"phi3_f16", "--arch phi3 --type f16", "--shards 2"},
                                           family_case{"gemma2_f16", "--arch gemma2 --type f16 --window 8", "", 1e-5},
                                           family_case{"gemma3_bf16", "--arch gemma3 --type bf16 --window 8",
                                                       "--shards 3", 1e-5}),
                         [](const auto &info) { return std::string(info.param.name); });

// Batching several sequences of an HF checkpoint gives each the tokens it gets alone.
TEST(HfCheckpoint, BatchedSequencesGetTheTokensEachGetsAlone) {
    auto e = make_engine(stories_hf("stories-hf", ""), 256, 16);
    const std::vector<std::vector<int32_t>> prompts = {{1, 400, 401}, {1, 300}, {1, 259, 260, 261, 262}};
    std::vector<std::vector<int32_t>> alone;
    for (const auto &p : prompts) alone.push_back(run_all(*e, {p}, 40)[0]);
    EXPECT_EQ(run_all(*e, prompts, 40), alone);
}

} // namespace
