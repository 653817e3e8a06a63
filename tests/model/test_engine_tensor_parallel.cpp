// Tensor parallel in one process (#16 item 3): N workers, each holding its share of every layer's query and KV heads
// and feed-forward columns (tensor_parallel_shard) and its heads' KV, all computing each step at once, the partial
// products of attn_output and ffn_down summed in rank order (tensor_parallel_group). The sums run in another order than
// one process's, so the logits are compared within a stated tolerance and the greedy tokens must be one process's;
// the same split gives the same bits in every run; each rank plans and holds only its share of the split weights.
#include "engine/worker.hpp"
#include "engine_fixture.hpp"
#include "model_file/open_model_file.hpp"
#include "model_file/tensor_parallel_shard.hpp"
#include "sanitizer_build.hpp"

#include <strata/kv_layout.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

using namespace strata;
using namespace strata::testing;
namespace fs = std::filesystem;

namespace {


std::string stories() { return shared_path("models/stories260K-f32.gguf"); }

// A random model of a family, 4 layers of 4 heads (2 KV heads) over a real SentencePiece vocabulary.
std::string family_model(const std::string &name, const std::string &args) {
    return made_model("tensor-parallel-" + name + ".gguf",
                      args + " --layers 4 --heads 4 --kv-heads 2 --ctx 256 --seed 11 --vocab-from " +
                          shared_path("models/vocab/ggml-vocab-llama-spm.gguf"));
}

engine::engine_options tp_options(const std::string &model, int32_t tp, uint64_t kv_bytes,
                                  engine::preemption_mode mode = engine::preemption_mode::recompute, double swap_gib = 0) {
    engine::engine_options o = batching_options(model, kv_bytes, mode, swap_gib);
    o.tensor_parallel_size = tp;
    return o;
}

// Every position's logits of a teacher-forced text (forward_logits).
std::vector<float> logits_of(engine::engine &e, const std::vector<int32_t> &tokens) {
    std::vector<float> out(tokens.size() * static_cast<size_t>(e.hparams().n_vocab));
    e.forward_logits(tokens.data(), static_cast<int32_t>(tokens.size()), 0, out.data());
    return out;
}

struct tp_case {
    const char *name;
    const char *args; // make-model's architecture, features, dimensions and type
    int32_t tp;
    uint64_t kv_bytes_per_token; // one process's
    // Float weights: the partial sums join in another order, a few ulps apart (logits within 1e-4 of the largest,
    // one process's greedy tokens). Quantized weights: each matmul's input is quantized to 8 bits a block, and an
    // ulp's difference can move a value across a rounding boundary, one quantization step: logits within 3% of the
    // largest, the same top token wherever one process's top two are further apart than twice that.
    bool quantized;
    const char *hf_export = nullptr; // the model written as an HF folder by hf-export with these arguments
};

void PrintTo(const tp_case &c, std::ostream *os) { *os << c.name << " x" << c.tp; }

class TensorParallelFamilies : public ::testing::TestWithParam<tp_case> {};

// Block shapes for cutting the test files' columns: Q8_0 (type 8) and F32.
std::pair<int64_t, int64_t> file_blocks(uint32_t type) {
    return type == 8 ? std::pair<int64_t, int64_t>{32, 34} : std::pair<int64_t, int64_t>{1, 4};
}

int32_t argmax(const float *row, int32_t n) { return static_cast<int32_t>(std::max_element(row, row + n) - row); }

// The gap between the largest and the second largest value of a row.
float top2_gap(const float *row, int32_t n) {
    float a = -INFINITY, b = -INFINITY;
    for (int32_t i = 0; i < n; ++i) {
        if (row[i] > a) b = a, a = row[i];
        else if (row[i] > b) b = row[i];
    }
    return a - b;
}

} // namespace

// Each family's attention and feed-forward split by heads and columns: every position's logits of a teacher-forced
// text within the case's tolerance of one process's (and the same top token where it is decided), eight prompts'
// greedy tokens one process's for float weights, and — the placement invariance — sixteen sequences under forced
// preemption (swap and recompute) each given the tokens the same ranks give it alone, every pool full after.
TEST_P(TensorParallelFamilies, RanksGiveOneProcessesLogitsWithinTheSumOrdersRoundingAndTheirAloneTokensUnderPreemption) {
    if (strata::testing::under_thread_sanitizer)
        GTEST_SKIP() << "kernel work on the families' weights: the group's threads are covered by "
                        "TensorParallel.TheSameSplitGivesTheSameBitsEveryRun under ThreadSanitizer";
    const tp_case &c = GetParam();
    std::string model = std::string(c.name) == "stories260K" ? stories() : family_model(c.name, c.args);
    ASSERT_FALSE(model.empty()) << "make-model failed";
    if (c.hf_export != nullptr) model = exported_hf(std::string("tensor-parallel-") + c.name, model, c.hf_export);
    ASSERT_FALSE(model.empty()) << "hf-export failed";
    const uint64_t blocks = c.kv_bytes_per_token * 16; // one process's 16-token blocks
    constexpr int n = 16;
    constexpr int32_t max_tokens = 32;
    test_table threads; // [cpu]: a thread per rank at least, on this 2-core machine too
    threads.ints["threads"] = std::max(2, c.tp);
    auto with_threads = [&](engine::engine_options o) {
        o.device_config = &threads.view;
        return o;
    };
    std::vector<std::vector<int32_t>> prompts, one_tokens, want;
    std::vector<int32_t> text;
    std::vector<float> one_logits;
    {
        auto one = engine_from(tp_options(model, 1, 256 * blocks));
        for (int i = 0; i < n; ++i) prompts.push_back(story_prompt(*one, i));
        for (int i = 0; i < 8; ++i) one_tokens.push_back(run_all(*one, {prompts[static_cast<size_t>(i)]}, max_tokens)[0]);
        text = one->tokenizer().encode("Once upon a time there was a little girl named Lily. She loved to play outside "
                                       "in the park with her friends and her dog. One day they found a big red ball "
                                       "under a tree and",
                                       true);
        one_logits = logits_of(*one, text);
    }
    {
        auto e = engine_from(with_threads(tp_options(model, c.tp, 256 * blocks / static_cast<uint64_t>(c.tp))));
        ASSERT_EQ(e->ranks().size(), static_cast<size_t>(c.tp));
        const auto got = logits_of(*e, text);
        ASSERT_EQ(got.size(), one_logits.size());
        const int32_t vocab = e->hparams().n_vocab;
        float largest = 0, worst = 0;
        for (size_t i = 0; i < got.size(); ++i) {
            largest = std::max(largest, std::fabs(one_logits[i]));
            worst = std::max(worst, std::fabs(got[i] - one_logits[i]));
        }
        const float allowed = (c.quantized ? 0.03f : 1e-4f) * largest;
        EXPECT_LE(worst, allowed) << "largest logit " << largest;
        EXPECT_GT(largest, 0.0f);
        int decided = 0;
        for (size_t t = 0; t < text.size(); ++t) {
            const float *want_row = one_logits.data() + t * static_cast<size_t>(vocab);
            if (top2_gap(want_row, vocab) <= 2 * allowed) continue;
            ++decided;
            EXPECT_EQ(argmax(got.data() + t * static_cast<size_t>(vocab), vocab), argmax(want_row, vocab))
                << "position " << t;
        }
        EXPECT_GE(decided, 5) << "too few positions where one process's top token is decided to compare";
        // The figures docs/STATUS.md quotes come from this line.
        std::printf("[tensor parallel] %s on %d ranks: max |logit - one process's| %.3g, %.3g of the largest logit "
                    "%.3g; top token compared at %d of %zu positions\n",
                    c.name, c.tp, static_cast<double>(worst), static_cast<double>(worst / largest),
                    static_cast<double>(largest), decided, text.size());
        for (int i = 0; i < n; ++i) want.push_back(run_all(*e, {prompts[static_cast<size_t>(i)]}, max_tokens)[0]);
        if (!c.quantized) {
            for (int i = 0; i < 8; ++i)
                EXPECT_EQ(want[static_cast<size_t>(i)], one_tokens[static_cast<size_t>(i)]) << "prompt " << i;
        }
    }
    for (auto mode : {engine::preemption_mode::swap, engine::preemption_mode::recompute}) {
        SCOPED_TRACE(mode == engine::preemption_mode::swap ? "swap" : "recompute");
        // 24 blocks (each rank its share of every one) for 16 sequences of ~3 blocks each.
        auto e = engine_from(with_threads(tp_options(model, c.tp, 24 * blocks / static_cast<uint64_t>(c.tp), mode,
                                                     mode == engine::preemption_mode::swap ? 0.01 : 0)));
        const auto got = run_all(*e, prompts, max_tokens);
        for (int i = 0; i < n; ++i) EXPECT_EQ(got[static_cast<size_t>(i)], want[static_cast<size_t>(i)]) << "sequence " << i;
        const strata_engine_stats s = e->stats();
        EXPECT_EQ(s.kv_blocks_total[0], 24);
        EXPECT_GT(mode == engine::preemption_mode::swap ? s.preemptions_swap : s.preemptions_recompute, 0)
            << "the KV budget was meant to force preemption";
        if (mode == engine::preemption_mode::swap) {
            EXPECT_EQ(s.kv_bytes_swapped_in, s.kv_bytes_swapped_out);
        }
        expect_pools_full(*e);
    }
}

INSTANTIATE_TEST_SUITE_P(
    Decoder, TensorParallelFamilies,
    ::testing::Values(tp_case{"stories260K", "", 2, 5 * 2 * 32 * 4, false},
                      tp_case{"stories260K", "", 4, 5 * 2 * 32 * 4, false},
                      tp_case{"llama_f16_512", "--dim 512 --ff 512 --type f16 --feature rope-freqs", 2, 4 * 2 * 256 * 4, false},
                      tp_case{"llama_biases_f32", "--dim 64 --ff 128 --type f32 --feature qkv-bias --feature mlp-bias",
                              2, 4 * 2 * 32 * 4, false},
                      tp_case{"llama_q8_0_512", "--dim 512 --ff 512 --type q8_0", 2, 4 * 2 * 256 * 4, true},
                      tp_case{"llama_q4_k_m_512", "--dim 512 --ff 512 --type q4_k_m", 2, 4 * 2 * 256 * 4, true},
                      tp_case{"qwen2_q8_0", "--arch qwen2 --dim 128 --ff 256 --type q8_0 --feature output-bias", 2,
                              4 * 2 * 64 * 4, true},
                      tp_case{"qwen3_f16_untied", "--arch qwen3 --dim 128 --head-dim 64 --ff 256 --type f16 --untied", 2,
                              4 * 2 * 128 * 4, false},
                      tp_case{"phi3_q4_0", "--arch phi3 --dim 128 --ff 256 --type q4_0 --feature fused-qkv", 2,
                              4 * 2 * 64 * 4, true},
                      tp_case{"gemma2_q8_0", "--arch gemma2 --dim 128 --ff 256 --window 8 --type q8_0", 2,
                              4 * 2 * 64 * 4, true},
                      tp_case{"gemma3_f32", "--arch gemma3 --dim 128 --ff 256 --window 8 --swa-pattern 2 --type f32", 2,
                              4 * 2 * 64 * 4, false},
                      // Mixtures of experts: every expert's inner columns split (ABI 1.30), the router whole.
                      tp_case{"mixtral_f32", "--dim 128 --ff 256 --experts 4 --experts-used 2 --type f32", 2,
                              4 * 2 * 64 * 4, false},
                      tp_case{"qwen3moe_q8_0", "--arch qwen3moe --dim 128 --ff 256 --experts 8 --experts-used 2 "
                              "--expert-ff 128 --type q8_0", 2, 4 * 2 * 64 * 4, true},
                      tp_case{"qwen2moe_shared_expert_f32", "--arch qwen2moe --dim 128 --ff 256 --experts 8 "
                              "--experts-used 2 --expert-ff 128 --type f32", 2, 4 * 2 * 64 * 4, false},
                      // An HF folder in two shards: Phi-3's fused qkv_proj and gate_up_proj, cut in their parts.
                      tp_case{"phi3_bf16_hf", "--arch phi3 --dim 128 --ff 256 --type bf16", 2, 4 * 2 * 64 * 4, false,
                              "--shards 2"}),
    [](const auto &info) { return std::string(info.param.name) + "_" + std::to_string(info.param.tp) + "_ranks"; });

// The ranks' sums join in rank order whatever the threads' timing: two engines of the same split give the same logits
// bit for bit, and so do the same ranks inside two pipeline stages (a group per stage, the residual stream between
// them). (Also the ThreadSanitizer case of the groups' threads, barrier and stream hand-over.)
TEST(TensorParallel, TheSameSplitGivesTheSameBitsEveryRun) {
    std::vector<float> first;
    for (int run = 0; run < 3; ++run) {
        auto o = tp_options(stories(), 2, 64 * 16 * 5 * 2 * 32 * 4);
        if (run == 2) o.pipeline_parallel_size = 2;
        auto e = engine_from(o);
        const auto text = e->tokenizer().encode("Once upon a time there was a little dog named Max who loved to run.", true);
        const auto got = logits_of(*e, text);
        if (run == 0) first = got;
        else EXPECT_EQ(got, first);
        EXPECT_EQ(run_all(*e, {text}, 16)[0].size(), 16u);
    }
}

// Each rank holds its share of the split weights (attn_q/k/v, attn_output, ffn_gate/up/down, the embedding and an
// untied classifier by vocabulary: 1/N of their bytes) and every other weight whole (norms), and plans exactly those bytes;
// its KV block is 1/N of one process's. The shares are cut from the file: rows of one part stay in the mapping,
// columns are gathered.
TEST(TensorParallel, EachRankPlansAndHoldsItsShareOfTheSplitWeights) {
    const std::string model =
        family_model("llama_q8_0_rope_freqs_untied", "--dim 128 --ff 256 --type q8_0 --feature rope-freqs --untied");
    ASSERT_FALSE(model.empty());
    const auto file = open_model_file(model, {}, false);
    auto split = [](const std::string &name) {
        for (const char *s : {"attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight", "ffn_gate.weight",
                              "ffn_up.weight", "ffn_down.weight", "output.weight", "token_embd.weight"})
            if (name.ends_with(s)) return true;
        return false;
    };
    uint64_t split_bytes = 0, whole_bytes = 0, listed_whole = 0;
    for (const auto &t : file->tensors()) {
        (split(t.name) ? split_bytes : whole_bytes) += t.n_bytes;
        if (!split(t.name) && t.name != "rope_freqs.weight") listed_whole += t.n_bytes; // rope_freqs is read at load
    }
    ASSERT_GT(split_bytes, 0u);
    {
        const int32_t tp = 2; // (4 ranks would split 2 KV heads)
        auto o = tp_options(model, tp, 64 * 16 * 4 * 2 * 64 * 4);
        auto e = engine_from(o);
        ASSERT_EQ(e->ranks().size(), static_cast<size_t>(tp));
        for (const engine::worker *w : e->ranks()) {
            const auto &p = w->memory_plan();
            EXPECT_EQ(p.device_weights + p.offloaded_bytes, listed_whole + split_bytes / static_cast<uint64_t>(tp));
            EXPECT_EQ(w->kv_block_bytes(), kv_layout::block_bytes(4, 16, 64 / tp, STRATA_KV_F32));
            EXPECT_EQ(w->hparams().n_head, 4 / tp);
            EXPECT_EQ(w->hparams().n_head_kv, 2 / tp);
            EXPECT_EQ(w->hparams().n_ff, 256 / tp);
        }
        EXPECT_EQ(e->hparams().n_head, 4) << "the engine reports the model's sizes";
        EXPECT_EQ(e->hparams().n_ff, 256);
    }
}

// The shard's parts against the file's bytes: attn_q's rows of rank r are the file's rows [r*R/N, (r+1)*R/N) in place,
// attn_output's columns of rank r each row's byte range of those columns (gathered), phi3's fused attn_qkv rank r's
// rows of q, then of k, then of v; norms are the file's tensors.
TEST(TensorParallelShard, PartsAreTheFilesRowsAndColumnsOfEachRank) {
    const std::string model = family_model("phi3_q8_0", "--arch phi3 --dim 128 --ff 256 --type q8_0 --feature fused-qkv");
    ASSERT_FALSE(model.empty());
    const auto file = open_model_file(model, {}, false);
    using axis = tensor_split_rule::axis;
    const std::map<std::string, tensor_split_rule> rules{
        {"blk.0.attn_qkv.weight", {axis::rows, {128, 64, 64}}},
        {"blk.0.attn_output.weight", {axis::cols, {128}}},
        {"blk.0.ffn_up.weight", {axis::rows, {256, 256}}},
        {"blk.0.attn_norm.weight", {axis::none, {}}},
    };
    const int64_t row = 128 / 32 * 34; // a Q8_0 row of 128
    for (int32_t r = 0; r < 2; ++r) {
        SCOPED_TRACE("rank " + std::to_string(r));
        tensor_parallel_shard shard(*file, rules, r, 2, file_blocks);
        const auto *qkv = shard.find_tensor("blk.0.attn_qkv.weight");
        const auto *whole_qkv = file->find_tensor("blk.0.attn_qkv.weight");
        ASSERT_NE(qkv, nullptr);
        EXPECT_EQ(qkv->ne[1], 128);
        EXPECT_EQ(qkv->n_bytes, static_cast<uint64_t>(128 * row));
        // q rows [64r, 64r+64), k rows 128 + [32r, 32r+32), v rows 192 + [32r, 32r+32).
        EXPECT_EQ(std::memcmp(qkv->data, whole_qkv->data + 64 * r * row, static_cast<size_t>(64 * row)), 0);
        EXPECT_EQ(std::memcmp(qkv->data + 64 * row, whole_qkv->data + (128 + 32 * r) * row, static_cast<size_t>(32 * row)), 0);
        EXPECT_EQ(std::memcmp(qkv->data + 96 * row, whole_qkv->data + (192 + 32 * r) * row, static_cast<size_t>(32 * row)), 0);
        const auto *out = shard.find_tensor("blk.0.attn_output.weight");
        const auto *whole_out = file->find_tensor("blk.0.attn_output.weight");
        EXPECT_EQ(out->ne[0], 64);
        EXPECT_EQ(out->ne[1], 128);
        for (int64_t i = 0; i < 128; ++i)
            ASSERT_EQ(std::memcmp(out->data + i * (row / 2), whole_out->data + i * row + r * (row / 2),
                                  static_cast<size_t>(row / 2)), 0) << "row " << i;
        const auto *up = shard.find_tensor("blk.0.ffn_up.weight");
        EXPECT_EQ(up->ne[1], 256);
        const auto *norm = shard.find_tensor("blk.0.attn_norm.weight");
        EXPECT_EQ(norm->data, file->find_tensor("blk.0.attn_norm.weight")->data) << "a whole tensor is the file's";
        EXPECT_EQ(shard.find_tensor("blk.1.attn_qkv.weight")->data, file->find_tensor("blk.1.attn_qkv.weight")->data)
            << "a tensor without a rule is the file's";
    }
    // One group of rows stays in the mapping.
    const std::map<std::string, tensor_split_rule> q_rows{{"blk.0.ffn_down.weight", {axis::cols, {256}}},
                                                          {"blk.0.attn_qkv.weight", {axis::rows, {256}}}};
    tensor_parallel_shard second(*file, q_rows, 1, 2, file_blocks);
    EXPECT_EQ(second.find_tensor("blk.0.attn_qkv.weight")->data, file->find_tensor("blk.0.attn_qkv.weight")->data + 128 * row);
    EXPECT_EQ(second.gathered_bytes(), second.find_tensor("blk.0.ffn_down.weight")->n_bytes) << "only columns gathered";
    // Cuts that cannot be made are refused naming the tensor.
    auto refused = [&](const std::map<std::string, tensor_split_rule> &bad, int32_t size, const std::string &says,
                       int32_t rank = 0) {
        try {
            tensor_parallel_shard s(*file, bad, rank, size, file_blocks);
            ADD_FAILURE() << "not refused: " << says;
        } catch (const error &e) {
            EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
        }
    };
    refused({{"blk.0.attn_qkv.weight", {axis::rows, {2, 254}}}}, 3, "too few for 3 tensor-parallel ranks");
    refused({{"blk.0.attn_output.weight", {axis::cols, {128}}}}, 8, "columns [16, 32), not whole 32-element blocks", 1);
    refused({{"blk.0.attn_output.weight", {axis::cols, {128}}}}, 3, "columns [0, 42), not whole 32-element blocks");
    refused({{"blk.0.attn_output.weight", {axis::cols, {100}}}}, 2, "do not add up");
    refused({{"no.such.weight", {axis::rows, {1}}}}, 2, "'no.such.weight'");
}

// A stack of experts [cols, rows, n_expert] (ABI 1.30's repeat): ffn_gate_exps' rows split expert by expert — rank r
// holds rows [r*R/N, (r+1)*R/N) of every expert, gathered in expert order —, ffn_down_exps' columns every row's; a rows
// rule that would cut the experts unalike is refused.
TEST(TensorParallelShard, StackedExpertsSplitEachExpertAlike) {
    const std::string model = family_model(
        "qwen3moe_q8_0", "--arch qwen3moe --dim 128 --ff 256 --experts 8 --experts-used 2 --expert-ff 128 --type q8_0");
    ASSERT_FALSE(model.empty());
    const auto file = open_model_file(model, {}, false);
    strata_tensor_split gate{};
    gate.axis = STRATA_SPLIT_ROWS;
    gate.n_parts = 1;
    gate.repeat = 8;
    gate.part[0] = 128;
    strata_tensor_split down{};
    down.axis = STRATA_SPLIT_COLS;
    down.n_parts = 1;
    down.part[0] = 128;
    const std::map<std::string, tensor_split_rule> rules{{"blk.0.ffn_gate_exps.weight", *split_rule_of(gate)},
                                                         {"blk.0.ffn_down_exps.weight", *split_rule_of(down)}};
    const int64_t row = 128 / 32 * 34; // a Q8_0 row of 128 (dim, and the experts' inner size)
    for (int32_t r = 0; r < 2; ++r) {
        SCOPED_TRACE("rank " + std::to_string(r));
        tensor_parallel_shard shard(*file, rules, r, 2, file_blocks);
        const auto *g = shard.find_tensor("blk.0.ffn_gate_exps.weight");
        const auto *whole_g = file->find_tensor("blk.0.ffn_gate_exps.weight");
        ASSERT_NE(g, nullptr);
        EXPECT_EQ(g->n_dims, 3u);
        EXPECT_EQ(g->ne[0], 128);
        EXPECT_EQ(g->ne[1], 64);
        EXPECT_EQ(g->ne[2], 8);
        EXPECT_EQ(g->n_bytes, static_cast<uint64_t>(8 * 64 * row));
        for (int64_t e = 0; e < 8; ++e)
            EXPECT_EQ(std::memcmp(g->data + e * 64 * row, whole_g->data + (e * 128 + 64 * r) * row,
                                  static_cast<size_t>(64 * row)), 0) << "expert " << e;
        const auto *d = shard.find_tensor("blk.0.ffn_down_exps.weight");
        const auto *whole_d = file->find_tensor("blk.0.ffn_down_exps.weight");
        EXPECT_EQ(d->ne[0], 64);
        EXPECT_EQ(d->ne[1], 128);
        EXPECT_EQ(d->ne[2], 8);
        for (int64_t i = 0; i < 128 * 8; ++i)
            ASSERT_EQ(std::memcmp(d->data + i * (row / 2), whole_d->data + i * row + r * (row / 2),
                                  static_cast<size_t>(row / 2)), 0) << "row " << i;
    }
    // Without the repeat the rows of the stack would be cut as one matrix: refused.
    gate.repeat = 0;
    gate.part[0] = 1024;
    try {
        tensor_parallel_shard s(*file, {{"blk.0.ffn_gate_exps.weight", *split_rule_of(gate)}}, 0, 2, file_blocks);
        ADD_FAILURE() << "a rows rule that cuts the experts unalike was not refused";
    } catch (const error &e) {
        EXPECT_NE(std::string(e.what()).find("does not cut each of its 8 stacked matrices alike"), std::string::npos)
            << e.what();
    }
    gate.repeat = 70000;
    EXPECT_FALSE(split_rule_of(gate).has_value()) << "a repeat past 65536 is not a rule the ABI knows";
}

// What cannot be split is refused at start-up with the reason: heads the size does not divide, a K-quant whose column
// share is not whole 256-element blocks, and a device with memory of its own (no NCCL yet).
TEST(TensorParallel, WhatCannotBeSplitIsRefusedWithTheReason) {
    auto refused = [](const engine::engine_options &o, const std::string &says) {
        try {
            auto e = engine_from(o);
            ADD_FAILURE() << "started: " << says;
        } catch (const error &e) {
            EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
        }
    };
    {
        test_table threads;
        threads.ints["threads"] = 3;
        auto three = tp_options(stories(), 3, 1 << 20);
        three.device_config = &threads.view;
        refused(three, "head_count 8 is not a multiple of tensor_parallel_size 3");
    }
    const std::string kq = family_model("llama_q4_k_m_small", "--dim 256 --ff 512 --type q4_k_m");
    ASSERT_FALSE(kq.empty());
    refused(tp_options(kq, 2, 1 << 20), "columns [0, 128), not whole 256-element blocks of its type");
    // Experts of 96 inner columns: rank 1's 48 of ffn_down_exps' Q8_0 rows are not whole 32-element blocks.
    const std::string moe =
        family_model("qwen3moe_q8_0_ff96", "--arch qwen3moe --dim 128 --ff 256 --experts 8 --experts-used 2 "
                                           "--expert-ff 96 --type q8_0");
    ASSERT_FALSE(moe.empty());
    refused(tp_options(moe, 2, 1 << 20), "ffn_down_exps.weight' would give rank 0 of 2 its columns [0, 48)");
    cpu_table gpu;
    auto own_memory = tp_options(stories(), 2, 1 << 20);
    own_memory.device_config = &gpu.view;
    refused(own_memory, "needs NCCL's all-reduce");
    refused(tp_options(stories(), 0, 1 << 20), "tensor_parallel_size 0 must be at least 1");
}

// A block of a tensor-parallel engine is its ranks' head shares one after another, not one process's layout: the
// persistent store's entries are keyed by the split, so a prefix two ranks saved serves two ranks after a restart
// and is never read by one process (which computes it again and gives the same tokens).
TEST(TensorParallelPrefix, AStoreIsReadBackByTheSameSplitOnly) {
    const int32_t max_tokens = 24;
    const fs::path dir = fs::path(STRATA_BINARY_DIR) / ("test-tp-prefix-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    auto opts = [&](int32_t tp) {
        auto o = tp_options(stories(), tp, 64 * 16 * 5 * 2 * 32 * 4 / static_cast<uint64_t>(tp));
        o.kv.enable_prefix_caching = true;
        o.kv.prefix_store_dir = dir.string();
        o.kv.prefix_store_gib = 0.01;
        return o;
    };
    std::vector<int32_t> p, miss;
    {
        auto plain = engine_from(tp_options(stories(), 1, 1 << 20));
        p = plain->tokenizer().encode("Once upon a time there was a little girl named Lily. She loved to play outside "
                                      "in the park with her friends and her dog.",
                                      true);
        ASSERT_GE(p.size(), 33u);
        miss = run_all(*plain, {p}, max_tokens)[0];
    }
    {
        auto w = engine_from(opts(2));
        EXPECT_EQ(run_all(*w, {p}, max_tokens)[0], miss);
    } // a clean shutdown writes the cached prefixes
    {
        auto one = engine_from(opts(1));
        EXPECT_EQ(run_all(*one, {p}, max_tokens)[0], miss);
        EXPECT_EQ(one->stats().prefix_hits[2], 0) << "one process read two ranks' blocks";
    }
    {
        auto again = engine_from(opts(2));
        EXPECT_EQ(run_all(*again, {p}, max_tokens)[0], miss);
        EXPECT_GE(again->stats().prefix_hits[2], 32) << "the prefix came from the persistent store";
        expect_pools_full(*again);
    }
    fs::remove_all(dir);
}

// Tensor-parallel ranks inside pipeline stages (-tp 2 -pp N in one process; vLLM's TP x PP): a stage's ranks hold
// their heads and columns of its layers and run it at once, the residual stream goes stage to stage unchanged and each
// all_reduce sums the same ranks' partial products in the same order as -tp 2 alone, so every logit is -tp 2's bit
// for bit, on every split; sixteen sequences under swap and recompute preemption get their alone tokens; each worker
// keeps its heads of its layers' KV, and the shares joined rank by rank are -tp 2's block, so a prefix -tp 2 saved in
// the persistent store serves -tp 2 -pp 2 after a restart and the other way round.
TEST(TensorParallelPipeline, RanksInsideStagesGiveTheTensorParallelRanksBitsOnEverySplitUnderPreemption) {
    if (strata::testing::under_thread_sanitizer)
        GTEST_SKIP() << "kernel work: the groups' threads are covered by TensorParallel.TheSameSplitGivesTheSameBits…";
    struct split_case {
        std::string model;
        std::vector<int32_t> layers; // per stage
        uint64_t kv_bytes_per_token; // one process's
    };
    const std::string gqa = family_model("llama_q8_0_512", "--dim 512 --ff 512 --type q8_0");
    const std::string moe = family_model("qwen3moe_q8_0", "--arch qwen3moe --dim 128 --ff 256 --experts 8 "
                                                          "--experts-used 2 --expert-ff 128 --type q8_0");
    ASSERT_FALSE(gqa.empty());
    ASSERT_FALSE(moe.empty());
    const std::vector<split_case> cases = {{stories(), {2, 3}, 5 * 2 * 32 * 4},
                                           {stories(), {1, 1, 3}, 5 * 2 * 32 * 4},
                                           {gqa, {3, 1}, 4 * 2 * 256 * 4},
                                           {moe, {2, 2}, 4 * 2 * 64 * 4}};
    constexpr int n = 16;
    constexpr int32_t max_tokens = 24;
    for (const split_case &c : cases) {
        SCOPED_TRACE(c.model + " in " + std::to_string(c.layers.size()) + " stages");
        const uint64_t blocks = c.kv_bytes_per_token * 16;
        auto staged = [&](engine::engine_options o) {
            o.pipeline_parallel_size = static_cast<int32_t>(c.layers.size());
            o.pipeline_layer_partition = c.layers;
            return o;
        };
        std::vector<std::vector<int32_t>> prompts, want;
        std::vector<int32_t> text;
        std::vector<float> tp_logits;
        {
            auto tp = engine_from(tp_options(c.model, 2, 256 * blocks / 2));
            for (int i = 0; i < n; ++i) prompts.push_back(story_prompt(*tp, i));
            for (int i = 0; i < n; ++i) want.push_back(run_all(*tp, {prompts[static_cast<size_t>(i)]}, max_tokens)[0]);
            text = tp->tokenizer().encode("Once upon a time there was a little girl named Lily. She loved to play "
                                          "outside in the park with her friends.",
                                          true);
            tp_logits = logits_of(*tp, text);
        }
        // kv_cache_memory is each worker's: n blocks of the largest stage's share.
        const int32_t most = *std::max_element(c.layers.begin(), c.layers.end());
        const int32_t n_layer = std::accumulate(c.layers.begin(), c.layers.end(), 0);
        const auto worker_blocks = [&](uint64_t n_blocks) {
            return n_blocks * blocks / 2 * static_cast<uint64_t>(most) / static_cast<uint64_t>(n_layer);
        };
        {
            auto e = engine_from(staged(tp_options(c.model, 2, worker_blocks(256))));
            ASSERT_EQ(e->ranks().size(), 2 * c.layers.size());
            for (size_t i = 0; i < e->ranks().size(); ++i) {
                const engine::worker &w = *e->ranks()[i];
                const size_t stage = i % c.layers.size(); // rank-major: rank t of stage s is worker t * S + s
                EXPECT_EQ(w.tensor_parallel().rank, static_cast<int32_t>(i / c.layers.size()));
                EXPECT_EQ(w.stage().layer_end - w.stage().layer_first, c.layers[stage]);
                EXPECT_EQ(w.kv_block_bytes() * static_cast<uint64_t>(n_layer),
                          blocks / 2 * static_cast<uint64_t>(c.layers[stage]))
                    << "its heads of its layers";
            }
            EXPECT_EQ(logits_of(*e, text), tp_logits) << "-tp 2's logits bit for bit";
            for (int i = 0; i < n; ++i)
                EXPECT_EQ(run_all(*e, {prompts[static_cast<size_t>(i)]}, max_tokens)[0], want[static_cast<size_t>(i)])
                    << "prompt " << i;
        }
        for (auto mode : {engine::preemption_mode::swap, engine::preemption_mode::recompute}) {
            SCOPED_TRACE(mode == engine::preemption_mode::swap ? "swap" : "recompute");
            // 24 blocks (each worker its share of every one) for 16 sequences of ~3 blocks each.
            auto e = engine_from(staged(tp_options(c.model, 2, worker_blocks(24), mode,
                                                   mode == engine::preemption_mode::swap ? 0.01 : 0)));
            const auto got = run_all(*e, prompts, max_tokens);
            for (int i = 0; i < n; ++i)
                EXPECT_EQ(got[static_cast<size_t>(i)], want[static_cast<size_t>(i)]) << "sequence " << i;
            const strata_engine_stats s = e->stats();
            EXPECT_EQ(s.kv_blocks_total[0], 24) << "the largest stage's workers hold 24 blocks";
            EXPECT_GT(mode == engine::preemption_mode::swap ? s.preemptions_swap : s.preemptions_recompute, 0)
                << "the KV budget was meant to force preemption";
            if (mode == engine::preemption_mode::swap) {
                EXPECT_EQ(s.kv_bytes_swapped_in, s.kv_bytes_swapped_out);
            }
            expect_pools_full(*e);
        }
    }
    // The persistent store: -tp 2 and -tp 2 -pp 2 lay a block out alike.
    const fs::path dir = fs::path(STRATA_BINARY_DIR) / ("test-tp-pp-prefix-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    auto stored = [&](int32_t stages) {
        auto o = tp_options(stories(), 2, 64 * 16 * 5 * 2 * 32 * 4 / 2);
        o.kv.enable_prefix_caching = true;
        o.kv.prefix_store_dir = dir.string();
        o.kv.prefix_store_gib = 0.01;
        o.pipeline_parallel_size = stages;
        return o;
    };
    std::vector<int32_t> p, miss;
    {
        auto tp = engine_from(stored(1));
        p = tp->tokenizer().encode("Once upon a time there was a little girl named Lily. She loved to play outside "
                                   "in the park with her friends and her dog.",
                                   true);
        ASSERT_GE(p.size(), 33u);
        miss = run_all(*tp, {p}, 24)[0];
    } // a clean shutdown writes the cached prefixes
    {
        auto staged_store = engine_from(stored(2));
        EXPECT_EQ(run_all(*staged_store, {p}, 24)[0], miss);
        EXPECT_GE(staged_store->stats().prefix_hits[2], 32) << "-tp 2's prefix read back by -tp 2 -pp 2";
    }
    fs::remove_all(dir);
    {
        auto staged_store = engine_from(stored(2));
        EXPECT_EQ(run_all(*staged_store, {p}, 24)[0], miss);
    }
    {
        auto tp = engine_from(stored(1));
        EXPECT_EQ(run_all(*tp, {p}, 24)[0], miss);
        EXPECT_GE(tp->stats().prefix_hits[2], 32) << "-tp 2 -pp 2's prefix read back by -tp 2";
        expect_pools_full(*tp);
    }
    fs::remove_all(dir);
}

// A tensor-parallel rank looks up, for a token outside its piece of the vocabulary, some row of its own piece (its
// first) and writes zeros over it before the ranks' rows are summed: copied zeros, so that a NaN in that row never
// reaches the sum (0 x NaN would). stories260K with a NaN in the first row of rank 1's piece (token 256) and a text
// without that token: every logit but that token's (the tied classifier reads the row) is finite and one process's
// within 1e-4 of the largest.
TEST(TensorParallel, ANanInTheRowLookedUpInAnotherPiecesPlaceNeverReachesTheSum) {
    const fs::path file = fs::path(STRATA_BINARY_DIR) / "test-models" / "stories260K-nan-row-256.gguf";
    fs::create_directories(file.parent_path());
    constexpr int64_t nan_token = 256; // stories260K: 512 tokens, rank 1 of 2 holds [256, 512)
    {
        std::ifstream in(stories(), std::ios::binary);
        std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        ASSERT_FALSE(bytes.empty());
        const auto model = open_model_file(stories(), {}, false);
        const gguf::tensor_info *embd = nullptr;
        for (const auto &t : model->tensors())
            if (t.name == "token_embd.weight") embd = &t;
        ASSERT_NE(embd, nullptr);
        ASSERT_EQ(embd->type, 0u) << "F32";
        const int64_t d = embd->ne[0];
        const char *row = reinterpret_cast<const char *>(embd->data) + nan_token * d * 4;
        // The row's bytes in the file (its offset is not this mapping's business): found once, then patched.
        const auto at = std::search(bytes.begin(), bytes.end(), row, row + d * 4);
        ASSERT_NE(at, bytes.end());
        ASSERT_EQ(std::search(at + 1, bytes.end(), row, row + d * 4), bytes.end()) << "the row's bytes are not unique";
        const float nan = std::numeric_limits<float>::quiet_NaN();
        std::memcpy(&*at, &nan, sizeof nan);
        std::ofstream(file, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    }
    std::vector<float> one, two;
    std::vector<int32_t> text;
    int32_t vocab = 0;
    {
        auto e = engine_from(tp_options(file.string(), 1, 1 << 20));
        text = e->tokenizer().encode("Once upon a time there was a little girl named Lily. She loved to play.", true);
        ASSERT_EQ(std::count(text.begin(), text.end(), static_cast<int32_t>(nan_token)), 0);
        ASSERT_GT(std::count_if(text.begin(), text.end(), [](int32_t t) { return t < nan_token; }), 0)
            << "rank 1 must look a row up in another piece's place";
        vocab = e->hparams().n_vocab;
        one = logits_of(*e, text);
    }
    {
        auto e = engine_from(tp_options(file.string(), 2, 1 << 20));
        two = logits_of(*e, text);
    }
    ASSERT_EQ(two.size(), one.size());
    float largest = 0, worst = 0;
    for (size_t i = 0; i < one.size(); ++i) {
        if (static_cast<int64_t>(i % static_cast<size_t>(vocab)) == nan_token) continue;
        ASSERT_TRUE(std::isfinite(two[i])) << "logit " << i % static_cast<size_t>(vocab) << " of position "
                                           << i / static_cast<size_t>(vocab);
        largest = std::max(largest, std::fabs(one[i]));
        worst = std::max(worst, std::fabs(two[i] - one[i]));
    }
    EXPECT_LE(worst, 1e-4f * largest);
}
