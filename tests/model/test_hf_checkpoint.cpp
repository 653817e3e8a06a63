// HF checkpoint folders end to end (tools/hf-export writes them from GGUFs): stories260K as an HF Llama checkpoint
// (Q/K in Hugging Face's rotate-half order, tokenizer.json built from tok512) gives run.c's reference text, and the
// same folder without the permutation does not (so the test proves the rotation, not two matching mistakes);
// sharded, untied and BF16 checkpoints and the Qwen2/Qwen3 mappings give the same tokens as the same weights in GGUF.
#include "config_only_plan.hpp"
#include "engine_fixture.hpp"
#include "model_file/open_model_file.hpp"
#include "made_model.hpp"
#include "quantizable_llama.hpp"
#include "same_model.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <tuple>
#include <vector>

namespace {

using namespace strata::testing;
namespace engine = strata::engine;


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
                                                       "--shards 3", 1e-5},
                                           // Gemma 3's multimodal layout: text_config, language_model.model.*
                                           // names and a vision tower that is set aside.
                                           family_case{"gemma3_multimodal_bf16", "--arch gemma3 --type bf16 --window 8",
                                                       "--multimodal --shards 2", 1e-5},
                                           // Mixtures of experts: one HF matrix per expert, stacked at load.
                                           family_case{"mixtral_bf16", "--type bf16 --experts 4 --experts-used 2",
                                                       "--shards 3", 1e-4},
                                           family_case{"qwen3moe_f16", "--arch qwen3moe --type f16 --head-dim 32 "
                                                                       "--experts 8 --experts-used 2 --expert-ff 64",
                                                       "--shards 2"},
                                           family_case{"qwen2moe_f16", "--arch qwen2moe --type f16 --experts 8 "
                                                                       "--experts-used 2 --expert-ff 64",
                                                       ""}),
                         [](const auto &info) { return std::string(info.param.name); });

// The experts are stacked in the order of their index, not the shard's: a checkpoint whose layer-0 experts 0 and 1
// trade gate matrices (their names swapped in the header, same lengths so the offsets hold) is another model, and
// must not give the GGUF's tokens (so the family test above proves the order, not two matching mistakes).
TEST(HfCheckpoint, ExpertsSwappedInTheHeaderGiveAnotherModel) {
    const std::string gguf = made_model("hf-family-qwen2moe_f16.gguf",
                                        "--arch qwen2moe --type f16 --experts 8 --experts-used 2 --expert-ff 64 --dim 64 "
                                        "--layers 6 --heads 4 --kv-heads 2 --ff 128 --ctx 256 --weight-scale 3 "
                                        "--vocab-from " + shared_path("models/stories260K-f32.gguf") + " 2>/dev/null");
    const std::string hf = exported_hf("hf-family-qwen2moe_f16", gguf, "");
    ASSERT_FALSE(hf.empty());
    const std::filesystem::path swapped = std::filesystem::path(hf).parent_path() / "hf-qwen2moe-experts-swapped";
    std::filesystem::remove_all(swapped);
    std::filesystem::copy(hf, swapped);
    std::string bytes;
    {
        std::ifstream in(swapped / "model.safetensors", std::ios::binary);
        bytes.assign(std::istreambuf_iterator<char>(in), {});
    }
    for (int layer = 0; layer < 6; ++layer) {
        const std::string a = "layers." + std::to_string(layer) + ".mlp.experts.0.gate_proj";
        const std::string b = "layers." + std::to_string(layer) + ".mlp.experts.1.gate_proj";
        const size_t at_a = bytes.find(a), at_b = bytes.find(b);
        ASSERT_NE(at_a, std::string::npos);
        ASSERT_NE(at_b, std::string::npos);
        bytes.replace(at_a, a.size(), b);
        bytes.replace(at_b, b.size(), a);
    }
    std::ofstream(swapped / "model.safetensors", std::ios::binary) << bytes;
    auto want = make_engine(gguf);
    auto got = make_engine(swapped.string());
    EXPECT_NE(generate(*got, "Once upon a time", greedy(60)).text, generate(*want, "Once upon a time", greedy(60)).text);
}

// A mixture's plan from config.json alone (with the index, and without it: the architecture's set) holds each
// layer's stacked expert tensors at the loaded checkpoint's shape and size (every matrix in torch_dtype, as real
// checkpoints store them: make-model keeps the routers in F32, so the export makes them BF16).
TEST(HfCheckpoint, AMixturePlanFromConfigJsonAloneHoldsTheStackedExperts) {
    for (const auto &[name, args, export_args] : std::vector<std::tuple<std::string, std::string, std::string>>{
             {"mixtral_bf16", "--type bf16 --experts 4 --experts-used 2", "--shards 3 --dtype bf16"},
             {"qwen2moe_bf16", "--arch qwen2moe --type bf16 --experts 8 --experts-used 2 --expert-ff 64", "--dtype bf16"}}) {
        SCOPED_TRACE(name);
        const std::string gguf = made_model("hf-family-" + name + ".gguf",
                                            args + " --dim 64 --layers 6 --heads 4 --kv-heads 2 --ff 128 --ctx 256 "
                                                   "--weight-scale 3 --vocab-from " +
                                                shared_path("models/stories260K-f32.gguf") + " 2>/dev/null");
        const std::string hf = exported_hf("hf-plan-full-" + name, gguf, export_args);
        ASSERT_FALSE(hf.empty());
        const auto full = strata::open_model_file(hf, {});
        expect_plan_matches(*full, *strata::open_model_file(config_only_copy(hf, "hf-plan-only-" + name), {}, true));
        int stacked = 0;
        for (const auto &t : full->tensors()) stacked += t.n_dims == 3 ? 1 : 0;
        EXPECT_EQ(stacked, 6 * 3) << "gate, up and down experts of each of the 6 layers";
    }
}

// Batching several sequences of an HF checkpoint gives each the tokens it gets alone.
TEST(HfCheckpoint, BatchedSequencesGetTheTokensEachGetsAlone) {
    auto e = make_engine(stories_hf("stories-hf", ""), 256, 16);
    const std::vector<std::vector<int32_t>> prompts = {{1, 400, 401}, {1, 300}, {1, 259, 260, 261, 262}};
    std::vector<std::vector<int32_t>> alone;
    for (const auto &p : prompts) alone.push_back(run_all(*e, {p}, 40)[0]);
    EXPECT_EQ(run_all(*e, prompts, 40), alone);
}

// Continuous batching under a KV budget that forces preemption (swap to the host tier, and recompute) gives every
// sequence of an HF checkpoint (3 BF16 shards; a GPTQ one) the tokens it gets alone, as the GGUF suites require.
void expect_preemption_invariance(const std::string &model, uint64_t block_bytes) {
    ASSERT_FALSE(model.empty());
    std::vector<std::vector<int32_t>> prompts;
    for (int i = 0; i < 12; ++i) prompts.push_back({1, 300 + 7 * i, 301 + i, 259 + (i % 5), 262});
    std::vector<std::vector<int32_t>> alone;
    {
        auto e = make_engine(model, 256, 32);
        for (const auto &p : prompts) alone.push_back(run_all(*e, {p}, 48)[0]);
    }
    for (engine::preemption_mode mode : {engine::preemption_mode::swap, engine::preemption_mode::recompute}) {
        engine::engine_options o = test_engine_options(model, 256, 32);
        o.offload.kv_cache_memory = 16 * block_bytes; // 12 sequences growing to 4 blocks each: preemption is certain
        o.scheduler.max_num_seqs = 12;
        o.scheduler.max_num_batched_tokens = 64;
        o.scheduler.mode = mode;
        o.kv.swap_space_gib = 0.01;
        auto e = std::make_unique<engine::engine>(test_registry(), test_host(), o);
        EXPECT_EQ(run_all(*e, prompts, 48), alone) << (mode == engine::preemption_mode::swap ? "swap" : "recompute");
        const strata_engine_stats st = e->stats();
        EXPECT_GT(st.preemptions_swap + st.preemptions_recompute, 0) << "the KV budget was meant to force preemption";
    }
}

TEST(HfCheckpoint, PreemptionGivesEachSequenceItsAloneTokens) {
    // stories260K: 5 layers x 2 x 4 KV heads x 8 dims x 4 bytes x 16 tokens = 20 KiB per block.
    expect_preemption_invariance(exported_hf("stories-hf-bf16-3-shards", shared_path("models/stories260K-f32.gguf"),
                                             "--shards 3 --dtype bf16"),
                                 20 * 1024);
}

TEST(HfCheckpoint, PreemptionGivesEachSequenceOfAGptqCheckpointItsAloneTokens) {
    if (std::string(STRATA_PYTHON3).empty()) GTEST_SKIP() << "python3 not found at configure time (tools/hf_quantize)";
    const auto [gptq, dequantized] =
        quantized_hf("hfq-gptq_4bit_g128_asym", quantizable_llama_hf(), "--method gptq --bits 4 --group-size 128 --asym");
    // 5 layers x 2 x 2 KV heads x 32 dims x 4 bytes x 16 tokens = 40 KiB per block.
    expect_preemption_invariance(gptq, 40 * 1024);
}

} // namespace
