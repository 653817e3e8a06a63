// The heart of the suite: greedy tokens must not change when only placement changes — which tier a weight lives in,
// offload on or off, streamed or computed in place, prefetch depth. Run on the real stories260K and on a make-model
// model at least four times the configured device budget.
#include "engine_fixture.hpp"
#include "made_model.hpp"
#include "quantizable_llama.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

namespace {

using namespace strata::testing;
using strata::engine::offload_options;
namespace fs = std::filesystem;

// A string config view for a tier's table (nvme needs a path; RAM tiers take their defaults).
struct table_view {
    std::map<std::string, std::string> strings;
    std::map<std::string, int64_t> ints;
    strata_config_view view{};
    table_view() {
        view.struct_size = sizeof view;
        view.ctx = this;
        view.get_string = [](void *ctx, const char *key, const char **out) -> int32_t {
            auto *self = static_cast<table_view *>(ctx);
            auto it = self->strings.find(key);
            if (it == self->strings.end()) return 0;
            *out = it->second.c_str();
            return 1;
        };
        view.get_int = [](void *ctx, const char *key, int64_t *out) -> int32_t {
            auto *self = static_cast<table_view *>(ctx);
            auto it = self->ints.find(key);
            if (it == self->ints.end()) return 0;
            *out = it->second;
            return 1;
        };
    }
};

// One file per test: CTest runs the tests of this binary in parallel processes, and two nvme tiers must never share
// a path (the tier refuses to overwrite a file it did not create).
table_view &nvme_table() {
    static table_view t = [] {
        table_view v;
        fs::create_directories(fs::path(STRATA_BINARY_DIR) / "test-nvme");
        const auto *info = ::testing::UnitTest::GetInstance()->current_test_info();
        std::string name = info ? info->name() : "weights";
        std::replace(name.begin(), name.end(), '/', '_'); // a parameterized test's name has one
        v.strings["path"] = std::string(STRATA_BINARY_DIR) + "/test-nvme/" + name + ".bin";
        fs::remove(v.strings["path"]); // left over by an earlier run that was killed
        return v;
    }();
    return t;
}

offload_options with_tier(offload_options o, const std::string &tier) {
    o.tiers = {tier};
    if (tier == "nvme") o.tier_configs["nvme"] = &nvme_table().view;
    return o;
}

struct variant {
    std::string name;
    offload_options opts;
};

std::vector<int32_t> greedy_tokens(const std::string &model, int32_t ctx, const offload_options &o, int32_t n,
                                   int64_t *offloaded_layers = nullptr) {
    auto e = make_engine(model, ctx, 16, o);
    if (offloaded_layers) *offloaded_layers = e->memory_plan().offloaded_layers;
    return generate(*e, "Once upon a time", greedy(n)).tokens;
}

offload_options layers(int32_t k) {
    offload_options o;
    o.cpu_offload_layers = k;
    return o;
}

// Every placement of stories260K's five layers: offload by count and by size, each tier in place or streamed, and
// the prefetch depths.
std::vector<variant> stories_placements() {
    std::vector<variant> vs;
    vs.push_back({"cpu_offload_layers=1", layers(1)});
    vs.push_back({"cpu_offload_layers=half", layers(2)});
    vs.push_back({"cpu_offload_layers=all", layers(5)});
    offload_options gb;
    gb.cpu_offload_gb = 0.0003; // about two layers of this tiny model
    vs.push_back({"cpu_offload_gb", gb});
    for (const char *tier : {"numa_ram", "pinned_ram", "nvme"}) {
        vs.push_back({std::string("tier ") + tier + " in place or streamed", with_tier(layers(5), tier)});
        offload_options s = with_tier(layers(5), tier);
        s.stream_weights = true;
        vs.push_back({std::string("tier ") + tier + " streamed", s});
    }
    for (int depth : {0, 1, 3}) {
        offload_options s = layers(5);
        s.stream_weights = true;
        s.prefetch_depth = depth;
        vs.push_back({"streamed prefetch_depth=" + std::to_string(depth), s});
    }
    return vs;
}

// `n` greedy tokens (the model must not end the text before them).
void expect_placement_invariance(const std::string &model, int32_t n = 120) {
    const std::vector<int32_t> want = greedy_tokens(model, 256, offload_options{}, n);
    ASSERT_EQ(want.size(), static_cast<size_t>(n));
    for (const variant &v : stories_placements()) {
        int64_t off = -1;
        EXPECT_EQ(greedy_tokens(model, 256, v.opts, n, &off), want) << v.name;
        EXPECT_GT(off, 0) << v.name << ": nothing was offloaded, so the variant tested nothing";
    }
}

TEST(PlacementInvariance, Stories260KGreedyTokensAreTheSameWherseverTheWeightsLive) {
    expect_placement_invariance(shared_path("models/stories260K-f32.gguf"));
}

// Pipeline ranks (#16 item 2): two ranks in this process holding layers [0, 2) and [2, 5) of stories260K, each placing
// its own weights by the same offload keys (every tier in place or streamed through its own prefetch ring, by count
// and by size, each prefetch depth): the one-process tokens every time. Rank 1's nvme tier keeps a file of its own
// beside rank 0's (ABI 1.26).
TEST(PlacementInvariance, PipelineRanksGiveTheSameTokensWhereverEachRanksWeightsLive) {
    const std::string model = shared_path("models/stories260K-f32.gguf");
    constexpr int32_t n = 48;
    const std::vector<int32_t> want = greedy_tokens(model, 256, offload_options{}, n);
    ASSERT_EQ(want.size(), static_cast<size_t>(n));
    for (const variant &v : stories_placements()) {
        fs::remove(nvme_table().strings["path"] + ".rank1"); // left over by an earlier run that was killed
        auto e = make_engine(model, 256, 16, v.opts, nullptr, {2, 3});
        EXPECT_GT(e->memory_plan().offloaded_layers, 0) << v.name << ": rank 0 offloaded nothing";
        EXPECT_EQ(generate(*e, "Once upon a time", greedy(n)).tokens, want) << v.name;
        if (v.name == "tier nvme streamed") {
            EXPECT_TRUE(fs::exists(nvme_table().strings["path"] + ".rank1")) << "rank 1's own tier file";
        }
    }
}

namespace {

// Two tensor-parallel ranks in this process, alone (no layers given) or inside pipeline stages of these layers each,
// placing their shares by `offload` (a 16 MiB KV cache each); the nvme tier files a killed earlier run left behind
// (one per rank past the first) are removed first.
std::unique_ptr<strata::engine::engine> two_tensor_parallel_ranks(const std::string &model,
                                                                  const std::vector<int32_t> &stage_layers,
                                                                  offload_options offload, bool mmap = true) {
    for (int r = 1; r < 4; ++r) fs::remove(nvme_table().strings["path"] + ".rank" + std::to_string(r));
    strata::engine::engine_options o = test_engine_options(model, 256, 16);
    o.file_open.mmap = mmap;
    o.scheduler.max_num_batched_tokens = 16;
    o.scheduler.max_num_seqs = 4;
    o.tensor_parallel_size = 2;
    o.pipeline_parallel_size = std::max<int32_t>(1, static_cast<int32_t>(stage_layers.size()));
    o.pipeline_layer_partition = stage_layers;
    offload.kv_cache_memory = uint64_t{16} << 20;
    offload.measure_bandwidth = o.offload.measure_bandwidth;
    offload.bandwidth_cache_path = o.offload.bandwidth_cache_path;
    o.offload = std::move(offload);
    return std::make_unique<strata::engine::engine>(test_registry(), test_host(), o);
}

} // namespace

// Tensor-parallel ranks (#16 item 3): two ranks in this process, each holding its half of every layer's heads and
// feed-forward columns of stories260K (attn_output's and ffn_down's columns gathered into memory of their own), each
// placing its share by the same offload keys (every tier in place or streamed, by count and by size, each prefetch
// depth): one process's tokens every time (float32 weights: the partial sums' order moves the logits by ulps only);
// and the same two ranks inside two pipeline stages, each of the four workers placing its heads of its layers.
//
// With --no-mmap the file is anonymous memory that the ranks share: a rank that moved a tensor to its tier must not drop
// those pages (they would read back as zeros for the other rank), only the columns it gathered itself.
TEST(PlacementInvariance, TensorParallelRanksGiveTheSameTokensWhereverEachRanksWeightsLive) {
    const std::string model = shared_path("models/stories260K-f32.gguf");
    constexpr int32_t n = 48;
    const std::vector<int32_t> want = greedy_tokens(model, 256, offload_options{}, n);
    ASSERT_EQ(want.size(), static_cast<size_t>(n));
    std::vector<variant> vs = stories_placements();
    offload_options embedding = with_tier(layers(5), "numa_ram");
    embedding.override_tensor = {"token_embd=numa_ram"};
    vs.push_back({"no-mmap: every layer and the embedding in numa_ram", embedding});
    // Alone, and inside two pipeline stages (layers [0, 2) and [2, 5): four workers, each its heads of its layers).
    for (const int32_t stages : {1, 2}) {
        for (const variant &v : vs) {
            SCOPED_TRACE(stages == 1 ? "-tp 2" : "-tp 2 -pp 2");
            auto e = two_tensor_parallel_ranks(model, stages == 1 ? std::vector<int32_t>{} : std::vector<int32_t>{2, 3},
                                               v.opts, v.name.rfind("no-mmap", 0) != 0);
            ASSERT_EQ(e->ranks().size(), 2u * static_cast<size_t>(stages));
            for (const auto *rank : e->ranks())
                EXPECT_GT(rank->memory_plan().offloaded_layers, 0) << v.name << ": a rank offloaded nothing";
            EXPECT_EQ(generate(*e, "Once upon a time", greedy(n)).tokens, want) << v.name;
            if (v.name == "tier nvme streamed") {
                for (int r = 1; r < 2 * stages; ++r)
                    EXPECT_TRUE(fs::exists(nvme_table().strings["path"] + ".rank" + std::to_string(r)))
                        << "rank " << r << "'s own tier file";
            }
        }
    }
}

// The same for a mixture of experts split by each expert's inner columns (qwen3moe, F32): offloaded, streamed from
// NVMe, and the experts alone in a host tier (--n-cpu-moe's split on the CPU device: the expert rows of the plan),
// alone and inside two pipeline stages: one process's tokens every time.
TEST(PlacementInvariance, TensorParallelMixtureGivesTheSameTokensWhereverEachRanksWeightsLive) {
    const std::string model = strata::testing::made_model(
        "pi-tp-qwen3moe-4l.gguf", "--arch qwen3moe --type f32 --experts 8 --experts-used 2 --expert-ff 64 --dim 64 "
                                  "--layers 4 --heads 4 --kv-heads 2 --ff 128 --ctx 256 --vocab-from " +
                                      shared_path("models/stories260K-f32.gguf"));
    ASSERT_FALSE(model.empty()) << "make-model failed";
    constexpr int32_t n = 48;
    const std::vector<int32_t> want = greedy_tokens(model, 256, offload_options{}, n);
    ASSERT_EQ(want.size(), static_cast<size_t>(n));
    std::vector<variant> vs;
    vs.push_back({"cpu_offload_layers=2", layers(2)});
    offload_options streamed = with_tier(layers(4), "nvme");
    streamed.stream_weights = true;
    vs.push_back({"tier nvme streamed", streamed});
    offload_options experts;
    experts.override_tensor = {"exps=numa_ram"};
    vs.push_back({"experts in numa_ram", experts});
    for (const int32_t stages : {1, 2}) {
        for (const variant &v : vs) {
            SCOPED_TRACE(stages == 1 ? "-tp 2" : "-tp 2 -pp 2");
            auto e = two_tensor_parallel_ranks(model, stages == 1 ? std::vector<int32_t>{} : std::vector<int32_t>{2, 2},
                                               v.opts);
            ASSERT_EQ(e->ranks().size(), 2u * static_cast<size_t>(stages));
            for (const auto *rank : e->ranks())
                EXPECT_GT(rank->memory_plan().offloaded_bytes, 0u) << v.name << ": a rank offloaded nothing";
            EXPECT_EQ(generate(*e, "Once upon a time", greedy(n)).tokens, want) << v.name;
        }
    }
}

// The same for an HF checkpoint (three safetensors shards, BF16 matrices, norms widened to F32 by the reader): its
// tensors point into the shards' mappings, and every tier and streaming path must read them there.
TEST(PlacementInvariance, HfCheckpointGreedyTokensAreTheSameWhereverTheWeightsLive) {
    const std::string hf = exported_hf("stories-hf-bf16-3-shards", shared_path("models/stories260K-f32.gguf"),
                                       "--shards 3 --dtype bf16");
    ASSERT_FALSE(hf.empty());
    expect_placement_invariance(hf);
}

// The same for an HF mixture of experts (Qwen2-MoE in BF16, 2 shards: each layer's per-expert matrices stacked at
// load into anonymous memory, beside a shared expert whose gate is a 1-row matrix): every tier reads the stacks.
TEST(PlacementInvariance, HfMixtureGreedyTokensAreTheSameWhereverTheWeightsLive) {
    const std::string gguf = strata::testing::made_model(
        "hf-pi-qwen2moe-5l.gguf", "--arch qwen2moe --type bf16 --experts 8 --experts-used 2 --expert-ff 64 --dim 64 "
                                  "--layers 5 --heads 4 --kv-heads 2 --ff 128 --ctx 256 --weight-scale 3 --vocab-from " +
                                   shared_path("models/stories260K-f32.gguf") + " 2>/dev/null");
    const std::string hf = exported_hf("hf-pi-qwen2moe-5l", gguf, "--shards 2");
    ASSERT_FALSE(hf.empty());
    expect_placement_invariance(hf, 48);
}

// The same for a GPTQ act-order checkpoint (4-bit groups of 32 with zero points over permuted inputs, repacked at
// load into anonymous memory with each layer's input order after its rows): every tier and streaming path reads the
// repacked weights, not the shard, and carries the input order with them.
TEST(PlacementInvariance, GptqCheckpointGreedyTokensAreTheSameWhereverTheWeightsLive) {
    if (std::string(STRATA_PYTHON3).empty()) GTEST_SKIP() << "python3 not found at configure time (tools/hf_quantize)";
    const auto [gptq, dequantized] = quantized_hf("hfq-gptq_4bit_g32_asym_act_order", quantizable_llama_hf(),
                                                  "--method gptq --bits 4 --group-size 32 --asym --act-order");
    ASSERT_FALSE(gptq.empty());
    expect_placement_invariance(gptq, 80); // this random model ends its text after 92
}

// The same for an AWQ checkpoint (4-bit groups of 128 with zero points, AutoAWQ's GEMM packing repacked at load).
TEST(PlacementInvariance, AwqCheckpointGreedyTokensAreTheSameWhereverTheWeightsLive) {
    if (std::string(STRATA_PYTHON3).empty()) GTEST_SKIP() << "python3 not found at configure time (tools/hf_quantize)";
    const auto [awq, dequantized] = quantized_hf("hfq-awq_4bit_g128", quantizable_llama_hf(), "--method awq --bits 4 --group-size 128");
    ASSERT_FALSE(awq.empty());
    expect_placement_invariance(awq, 48);
}

// The same for an FP8 checkpoint (compressed-tensors, e4m3 with a scale per 64 x 64 block, repacked at load into FP8
// blocks of 32 with an f32 scale each).
TEST(PlacementInvariance, Fp8CheckpointGreedyTokensAreTheSameWhereverTheWeightsLive) {
    if (std::string(STRATA_PYTHON3).empty()) GTEST_SKIP() << "python3 not found at configure time (tools/hf_quantize)";
    const auto [fp8, dequantized] = quantized_hf("hfq-ct_fp8_block64", quantizable_llama_hf(),
                                                 "--method compressed-tensors --scheme block --block-size 64");
    ASSERT_FALSE(fp8.empty());
    expect_placement_invariance(fp8, 48);
}

// Files whose tensors mix quantization types (make-model's Q4_K_M: Q4_K, Q6_K for the output and some attn_v /
// ffn_down layers, F32 norms; its Q5_0: Q5_0 with the same kind of exceptions), each type through its own GEMM tile:
// every placement gives the same greedy tokens, each tensor computed in its own type.
TEST(PlacementInvariance, MixedQuantTypesGiveTheSameTokensWhereverTheWeightsLive) {
    for (const char *type : {"q4_k_m", "q5_0"}) {
        const fs::path file = fs::path(STRATA_BINARY_DIR) / "test-models" / (std::string("llama-4l-") + type + ".gguf");
        if (!fs::exists(file)) {
            fs::create_directories(file.parent_path());
            const std::string cmd = std::string(STRATA_BINARY_DIR) + "/bin/make-model --out " + file.string() +
                                    " --dim 256 --layers 4 --heads 4 --kv-heads 1 --ff 512 --ctx 128 --type " + type +
                                    " --seed 5 --vocab-from " + shared_path("models/stories260K-f32.gguf") +
                                    " 2>/dev/null";
            ASSERT_EQ(std::system(cmd.c_str()), 0) << "make-model failed for " << type;
        }
        const std::string model = file.string();
        const std::vector<int32_t> want = greedy_tokens(model, 128, offload_options{}, 60);
        ASSERT_EQ(want.size(), 60u) << type;
        std::vector<variant> vs;
        vs.push_back({"cpu_offload_layers=2", layers(2)});
        vs.push_back({"cpu_offload_layers=all", layers(4)});
        for (const char *tier : {"numa_ram", "pinned_ram", "nvme"}) {
            offload_options s = with_tier(layers(4), tier);
            s.stream_weights = true;
            vs.push_back({std::string("tier ") + tier + " streamed", s});
        }
        for (const variant &v : vs) {
            int64_t off = -1;
            EXPECT_EQ(greedy_tokens(model, 128, v.opts, 60, &off), want) << type << " " << v.name;
            EXPECT_GT(off, 0) << type << " " << v.name << ": nothing was offloaded, so the variant tested nothing";
        }
    }
}

// A model at least 4x the device budget: only the embedding and output stay resident.
std::string big_model() {
    const fs::path file = fs::path(STRATA_BINARY_DIR) / "test-models" / "llama-34l-f32.gguf";
    if (!fs::exists(file)) {
        fs::create_directories(file.parent_path());
        const std::string cmd = std::string(STRATA_BINARY_DIR) + "/bin/make-model --out " + file.string() +
                                " --dim 256 --layers 34 --heads 8 --kv-heads 4 --ff 704 --ctx 128 --type f32 --seed 3"
                                " --vocab-from " + shared_path("models/stories260K-f32.gguf");
        if (std::system(cmd.c_str()) != 0) return {};
    }
    return file.string();
}

// Every family of the decoder plugin, and the Llama features beyond the nine tensors (make-model --arch/--feature):
// llama with Llama 3.1+'s RoPE frequency factors and linear RoPE scaling (rope_ext; the factors are read once by the
// model, so they must stay right wherever the weights live), llama with Q/K/V and MLP biases, qwen2 (Q/K/V biases,
// NEOX RoPE), qwen3 (per-head Q/K norms, a head size other than dim / heads) and phi3 (fused Q/K/V with a fused bias,
// fused gate-up: views into one tensor, so they must move with it), YaRN and LongRoPE (rope_scaled), qwen2's
// output.bias (a weight beside the classifier), gemma2 (a window of 8 on every other layer, attention and final
// soft-caps), gemma3 (windowed layers with their own RoPE beside a global one with linear scaling) and the
// mixtures of experts (mixtral, qwen3moe, qwen2moe with its shared expert: 3-D expert tensors moved and streamed whole with their layer). Offloaded,
// streamed from NVMe, and on a device with its own memory (the CPU device's separate_memory mode takes the GPU's
// paths).
struct family_case {
    const char *name;
    const char *args;
};

void PrintTo(const family_case &c, std::ostream *os) { *os << c.name; }

// The case's 4-layer F32 model (dim 64), made once per build tree.
std::string family_model(const family_case &c) {
    return strata::testing::made_model(std::string("family-4l-") + c.name + ".gguf",
                                       std::string("--dim 64 --layers 4 --heads 4 --kv-heads 2 --ff 128 --ctx 256 "
                                                   "--type f32 ") +
                                           c.args + " --vocab-from " + shared_path("models/stories260K-f32.gguf"));
}

class PlacementInvarianceFamilies : public ::testing::TestWithParam<family_case> {};

TEST_P(PlacementInvarianceFamilies, GreedyTokensAreTheSameWhereverTheWeightsLive) {
    const family_case &c = GetParam();
    const std::string model = family_model(c);
    ASSERT_FALSE(model.empty()) << "make-model failed";
    const std::vector<int32_t> want = greedy_tokens(model, 256, offload_options{}, 80);
    ASSERT_EQ(want.size(), 80u);
    std::vector<variant> vs;
    vs.push_back({"cpu_offload_layers=2", layers(2)});
    offload_options s = with_tier(layers(4), "nvme");
    s.stream_weights = true;
    s.prefetch_depth = 1;
    vs.push_back({"tier nvme streamed", s});
    for (const variant &v : vs) {
        int64_t off = -1;
        EXPECT_EQ(greedy_tokens(model, 256, v.opts, 80, &off), want) << v.name;
        EXPECT_GT(off, 0) << v.name << ": nothing was offloaded, so the variant tested nothing";
    }
    cpu_table gpu;
    for (const offload_options &o : {offload_options{}, layers(2)}) {
        auto e = make_engine(model, 256, 16, o, &gpu.view);
        EXPECT_EQ(generate(*e, "Once upon a time", greedy(80)).tokens, want) << "separate_memory";
    }
}

INSTANTIATE_TEST_SUITE_P(Decoder, PlacementInvarianceFamilies,
                         ::testing::Values(family_case{"llama_rope_freqs_linear",
                                                       "--feature rope-freqs --feature rope-scaling-linear"},
                                           family_case{"llama_biases", "--feature qkv-bias --feature mlp-bias"},
                                           family_case{"qwen2", "--arch qwen2"},
                                           family_case{"qwen3", "--arch qwen3 --head-dim 32"},
                                           family_case{"phi3_qkv_bias", "--arch phi3 --feature qkv-bias"},
                                           family_case{"qwen2_yarn_output_bias",
                                                       "--arch qwen2 --feature rope-scaling-yarn --feature output-bias"},
                                           family_case{"phi3_longrope", "--arch phi3 --feature longrope --seed 3"},
                                           family_case{"gemma2_window_caps", "--arch gemma2 --window 8 --attn-softcap 2 "
                                                                             "--final-softcap 3"},
                                           family_case{"gemma3_window_pattern",
                                                       "--arch gemma3 --head-dim 32 --window 8 --swa-pattern 3 "
                                                       "--feature rope-scaling-linear --final-softcap 5"},
                                           family_case{"mixtral", "--experts 4 --experts-used 2"},
                                           family_case{"qwen3moe", "--arch qwen3moe --head-dim 32 --experts 8 "
                                                                   "--experts-used 2 --expert-ff 64"},
                                           family_case{"qwen2moe_shared_expert",
                                                       "--arch qwen2moe --experts 8 --experts-used 2 --expert-ff 64"}),
                         [](const auto &info) { return std::string(info.param.name); });

TEST(PlacementInvariance, ModelFourTimesTheDeviceBudgetGivesTheSameTokens) {
    const std::string model = big_model();
    ASSERT_FALSE(model.empty()) << "make-model failed";
    const uint64_t budget = 20ull << 20;
    ASSERT_GE(fs::file_size(model), 4 * budget);
    const std::vector<int32_t> want = greedy_tokens(model, 64, offload_options{}, 40);
    ASSERT_EQ(want.size(), 40u);

    std::vector<variant> vs;
    offload_options automatic;
    automatic.device_memory = budget;
    automatic.enable_cpu_offload = true;
    vs.push_back({"enable_cpu_offload in place", automatic});
    for (int depth : {0, 1, 3}) {
        offload_options s = automatic;
        s.stream_weights = true;
        s.prefetch_depth = depth;
        vs.push_back({"enable_cpu_offload streamed depth " + std::to_string(depth), s});
    }
    offload_options nv = with_tier(automatic, "nvme");
    vs.push_back({"nvme streamed", nv});
    offload_options pinned = with_tier(automatic, "pinned_ram");
    vs.push_back({"pinned_ram in place", pinned});
    for (const variant &v : vs) {
        int64_t off = -1;
        EXPECT_EQ(greedy_tokens(model, 64, v.opts, 40, &off), want) << v.name;
        EXPECT_GE(off, 20) << v.name << ": expected most layers off the 20 MiB device";
    }
}

// Hybrid placement (llama.cpp -ngl) on the paths a GPU takes — the CPU device's separate_memory mode stands in for
// it: offloaded layers computed by a second, host CPU device where they live (with attention on the "GPU", where the
// KV is), streamed for batches of op_offload_min_batch+ tokens, or streamed always. Same kernels on both devices, so
// the tokens must be identical to the "GPU" holding every weight.
TEST(PlacementInvariance, HybridPlacementGivesTheSameTokensAsTheDeviceHoldingEveryWeight) {
    const std::string model = shared_path("models/stories260K-f32.gguf");
    cpu_table gpu;
    auto run = [&](const offload_options &o, strata::engine::engine::hybrid_report *h = nullptr) {
        auto e = make_engine(model, 256, 16, o, &gpu.view);
        auto tokens = generate(*e, "Once upon a time", greedy(120)).tokens;
        if (h) *h = e->hybrid();
        return tokens;
    };
    const std::vector<int32_t> want = run(offload_options{});
    ASSERT_EQ(want.size(), 120u);
    strata::engine::engine::hybrid_report h;

    offload_options streamed = layers(3);
    streamed.offload_compute = "device";
    EXPECT_EQ(run(streamed, &h), want) << "offloaded layers streamed to the device";
    EXPECT_TRUE(h.host_layers.empty());

    offload_options cpu = layers(3);
    cpu.offload_compute = "cpu";
    cpu.op_offload = false; // llama.cpp --no-op-offload: every step computes them on the CPU
    EXPECT_EQ(run(cpu, &h), want) << "offloaded layers computed on the CPU";
    EXPECT_EQ(h.host_layers, (std::vector<int32_t>{2, 3, 4}));
    EXPECT_EQ(h.min_batch, 0);
    EXPECT_GT(h.cpu_steps, 100u);
    EXPECT_EQ(h.streamed_steps, 0u);

    // The prompt (5 tokens with BOS) streams the layers to the device, every decode step computes them on the CPU.
    // prefetch_depth 1: two slots for three layers, so the CPU layers' ring cycles and a decode step that used the
    // device's views of them would read the wrong layer.
    offload_options mixed = layers(3);
    mixed.offload_compute = "cpu";
    mixed.op_offload_min_batch = 4;
    mixed.prefetch_depth = 1;
    EXPECT_EQ(run(mixed, &h), want) << "prefill streamed, decode on the CPU";
    EXPECT_EQ(h.min_batch, 4);
    EXPECT_EQ(h.streamed_steps, 1u);
    EXPECT_GT(h.cpu_steps, 100u);

    for (const char *tier : {"pinned_ram", "numa_ram"}) {
        offload_options all = with_tier(layers(5), tier);
        all.offload_compute = "cpu";
        all.op_offload_min_batch = 2;
        EXPECT_EQ(run(all, &h), want) << "every layer on the CPU, tier " << tier;
        EXPECT_EQ(h.host_layers.size(), 5u);
    }

    // Two pipeline ranks ([0, 2) and [2, 5)) with their layers on the CPU beside their "GPU" (cpu_offload_layers
    // applies per rank, at most all of a rank's): every layer, then each rank's last, by the model's numbers.
    auto e = make_engine(model, 256, 16, cpu, &gpu.view, {2, 3});
    EXPECT_EQ(generate(*e, "Once upon a time", greedy(120)).tokens, want) << "two ranks, all their layers on the CPU";
    EXPECT_EQ(e->hybrid().host_layers, (std::vector<int32_t>{0, 1}));
    offload_options one = layers(1);
    one.offload_compute = "cpu";
    one.op_offload = false;
    auto ranks = make_engine(model, 256, 16, one, &gpu.view, {2, 3});
    EXPECT_EQ(generate(*ranks, "Once upon a time", greedy(120)).tokens, want) << "two ranks, a layer each on the CPU";
    EXPECT_EQ(ranks->hybrid().host_layers, (std::vector<int32_t>{1}));
    EXPECT_GT(ranks->hybrid().cpu_steps, 100u);
}

// Layers in a tier the CPU cannot compute on in place (nvme) keep streaming next to the CPU-computed ones.
TEST(PlacementInvariance, HybridPlacementStreamsNvmeLayersAndComputesRamLayersOnTheCpu) {
    const std::string model = shared_path("models/stories260K-f32.gguf");
    cpu_table gpu;
    const std::vector<int32_t> want = [&] {
        auto e = make_engine(model, 256, 16, offload_options{}, &gpu.view);
        return generate(*e, "Once upon a time", greedy(60)).tokens;
    }();
    table_view small_ram;
    small_ram.ints["size"] = 300 * 1024; // room for one layer of stories260K; the rest goes to nvme
    offload_options o = layers(4);
    o.tiers = {"numa_ram", "nvme"};
    o.tier_configs["numa_ram"] = &small_ram.view;
    o.tier_configs["nvme"] = &nvme_table().view;
    o.offload_compute = "cpu";
    o.op_offload = false; // no ring for the CPU layers: the device has no copy of them at all
    auto e = make_engine(model, 256, 16, o, &gpu.view);
    EXPECT_EQ(generate(*e, "Once upon a time", greedy(60)).tokens, want);
    const auto h = e->hybrid();
    ASSERT_FALSE(h.host_layers.empty()) << "no layer landed in numa_ram";
    EXPECT_LT(h.host_layers.size(), 4u) << "no layer landed in nvme";
    EXPECT_GT(e->offload_stats().tiers.count("nvme"), 0u) << "the nvme layers were streamed";
}

// Experts on the CPU (llama.cpp's --n-cpu-moe / --cpu-moe) on the paths a GPU takes (separate_memory): the routed
// experts of the chosen layers stay in host RAM and the host CPU device computes them there while attention, the
// router and the shared expert run on the "GPU". Same kernels on both devices, so the tokens must equal the "GPU"
// holding every weight — for every mixture family, next to whole layers on the CPU and with the experts streamed.
class ExpertsOnTheCpu : public ::testing::TestWithParam<family_case> {};

TEST_P(ExpertsOnTheCpu, GiveTheSameTokensAsTheDeviceHoldingEveryWeight) {
    const family_case &c = GetParam();
    const std::string model = family_model(c);
    ASSERT_FALSE(model.empty()) << "make-model failed";
    cpu_table gpu;
    auto run = [&](const offload_options &o, strata::engine::engine::hybrid_report *h = nullptr,
                   strata::planner::plan *plan = nullptr) {
        auto e = make_engine(model, 256, 16, o, &gpu.view);
        auto tokens = generate(*e, "Once upon a time", greedy(60)).tokens;
        if (h) *h = e->hybrid();
        if (plan) *plan = e->memory_plan();
        return tokens;
    };
    const std::vector<int32_t> want = run(offload_options{});
    ASSERT_EQ(want.size(), 60u);
    strata::engine::engine::hybrid_report h;
    strata::planner::plan plan;

    offload_options first_two;
    first_two.n_cpu_moe = 2;
    EXPECT_EQ(run(first_two, &h, &plan), want) << "--n-cpu-moe 2";
    EXPECT_EQ(h.expert_layers, (std::vector<int32_t>{0, 1}));
    EXPECT_TRUE(h.host_layers.empty());
    int cpu_experts = 0;
    for (const auto &p : plan.placements) {
        if (p.how == strata::planner::mode::cpu_experts) {
            ++cpu_experts;
            EXPECT_TRUE(p.routed_expert) << p.tensor;
            EXPECT_LT(p.layer, 2) << p.tensor;
        } else {
            EXPECT_EQ(p.home, "device") << p.tensor;
        }
    }
    EXPECT_EQ(cpu_experts, 6); // gate, up and down of two layers
    EXPECT_EQ(plan.staging_ring_bytes, 0u);

    // Two pipeline ranks ([0, 2) and [2, 4)) with --n-cpu-moe 3: the first three layers' experts by the model's
    // numbers, rank 0 computing its two.
    offload_options first_three;
    first_three.n_cpu_moe = 3;
    auto ranks = make_engine(model, 256, 16, first_three, &gpu.view, {2, 2});
    EXPECT_EQ(generate(*ranks, "Once upon a time", greedy(60)).tokens, want) << "two ranks, --n-cpu-moe 3";
    EXPECT_EQ(ranks->hybrid().expert_layers, (std::vector<int32_t>{0, 1}));
    ranks.reset();

    offload_options all;
    all.cpu_moe = true;
    EXPECT_EQ(run(all, &h), want) << "--cpu-moe";
    EXPECT_EQ(h.expert_layers, (std::vector<int32_t>{0, 1, 2, 3}));

    offload_options streamed = all;
    streamed.offload_compute = "device";
    EXPECT_EQ(run(streamed, &h, &plan), want) << "--cpu-moe, experts streamed to the device";
    EXPECT_TRUE(h.expert_layers.empty());
    EXPECT_GT(plan.staging_ring_bytes, 0u);

    // Layer 3 whole on the CPU beside the experts of layers 0 and 1; the prompt streams layer 3 to the device.
    offload_options mixed = layers(1);
    mixed.n_cpu_moe = 2;
    mixed.offload_compute = "cpu";
    mixed.op_offload_min_batch = 4;
    EXPECT_EQ(run(mixed, &h), want) << "--n-cpu-moe 2 with the last layer on the CPU";
    EXPECT_EQ(h.expert_layers, (std::vector<int32_t>{0, 1}));
    EXPECT_EQ(h.host_layers, (std::vector<int32_t>{3}));
    EXPECT_EQ(h.streamed_steps, 1u);

    // Layers offloaded by count (-ngl): their routed experts are computed by the CPU in every step, whatever the
    // measured choice for the rest of those layers (streamed, or on the CPU too).
    offload_options offloaded = layers(2);
    EXPECT_EQ(run(offloaded, &h, &plan), want) << "--cpu-offload-layers 2";
    int on_the_cpu = 0;
    for (const auto &p : plan.placements) {
        if (!p.routed_expert || p.layer < 2) continue;
        EXPECT_TRUE(p.how == strata::planner::mode::cpu_experts || p.how == strata::planner::mode::on_cpu)
            << p.tensor << " is " << strata::planner::to_string(p.how);
        ++on_the_cpu;
    }
    EXPECT_EQ(on_the_cpu, 6); // gate, up and down of layers 2 and 3

    // On the CPU device itself host RAM is the device: --cpu-moe changes nothing.
    const std::vector<int32_t> cpu_want = greedy_tokens(model, 256, offload_options{}, 60);
    EXPECT_EQ(cpu_want, want);
    int64_t off = -1;
    EXPECT_EQ(greedy_tokens(model, 256, all, 60, &off), want);
    EXPECT_EQ(off, 0);
}

INSTANTIATE_TEST_SUITE_P(Decoder, ExpertsOnTheCpu,
                         ::testing::Values(family_case{"mixtral", "--experts 4 --experts-used 2"},
                                           family_case{"qwen3moe", "--arch qwen3moe --head-dim 32 --experts 8 "
                                                                   "--experts-used 2 --expert-ff 64"},
                                           family_case{"qwen2moe_shared_expert",
                                                       "--arch qwen2moe --experts 8 --experts-used 2 --expert-ff 64"}),
                         [](const auto &info) { return std::string(info.param.name); });

// A device without the mixture-of-experts ops (moe_route, matmul_id, moe_combine), as a GPU plugin built without them
// would be: tests/offload/fixtures/cpu_without_experts_device.cpp, the CPU device under another name with those slots
// cleared, on the paths a GPU takes (separate_memory). With --cpu-moe every routed expert stays in host RAM and the
// CPU computes it, so the device needs none of the three: the tokens of a device holding every weight. A plan that
// leaves any layer's experts to it is refused at start-up, naming the ops, the device and --cpu-moe; and the same
// device as the offload device cannot compute them either: its experts stream to the main device instead, and a
// plan that insists on the CPU (offload_compute = cpu) is refused naming it.
TEST(ExpertsOnTheCpuBesideADeviceWithoutExpertOps, CpuMoeRunsTheMixtureAndAnythingElseIsRefusedNamingTheOps) {
    const std::string model = family_model({"qwen3moe", "--arch qwen3moe --head-dim 32 --experts 8 --experts-used 2 "
                                                        "--expert-ff 64"});
    ASSERT_FALSE(model.empty()) << "make-model failed";
    static strata::plugins::registry reg = [] {
        strata::plugins::registry r(test_host());
        r.load_directory(STRATA_PLUGIN_DIR);
        r.load_directory(STRATA_DEVICE_FIXTURE_DIR);
        return r;
    }();
    ASSERT_NE(reg.find_device("cpu_without_experts").desc, nullptr);
    EXPECT_EQ(reg.find_device("cpu_without_experts").desc->matmul_id, nullptr);
    cpu_table gpu;
    auto engine_on = [&](const std::string &device, offload_options o) {
        strata::engine::engine_options e = test_engine_options(model, 256, 16);
        e.device = device;
        e.scheduler.max_num_batched_tokens = 16;
        e.scheduler.max_num_seqs = 4;
        e.device_config = &gpu.view;
        o.measure_bandwidth = false;
        o.bandwidth_cache_path = e.offload.bandwidth_cache_path;
        e.offload = std::move(o);
        return std::make_unique<strata::engine::engine>(reg, test_host(), e);
    };
    const std::vector<int32_t> want = generate(*engine_on("cpu", offload_options{}), "Once upon a time", greedy(60)).tokens;
    ASSERT_EQ(want.size(), 60u);
    offload_options all;
    all.cpu_moe = true;
    {
        auto e = engine_on("cpu_without_experts", all);
        EXPECT_EQ(generate(*e, "Once upon a time", greedy(60)).tokens, want) << "--cpu-moe";
        EXPECT_EQ(e->hybrid().expert_layers, (std::vector<int32_t>{0, 1, 2, 3}));
    }
    auto refused = [&](const std::string &device, const offload_options &o, const std::vector<std::string> &says) {
        try {
            engine_on(device, o);
            ADD_FAILURE() << "started on " << device;
        } catch (const std::exception &e) {
            for (const std::string &s : says) EXPECT_NE(std::string(e.what()).find(s), std::string::npos) << e.what();
        }
    };
    refused("cpu_without_experts", offload_options{}, {"moe_route, matmul_id and moe_combine", "cpu_without_experts"});
    offload_options first_two;
    first_two.n_cpu_moe = 2;
    refused("cpu_without_experts", first_two, {"moe_route, matmul_id and moe_combine", "--cpu-moe"});
    // The device that lacks them as the offload device: the experts stream to the main device (which has the ops).
    offload_options elsewhere = all;
    elsewhere.offload_device = "cpu_without_experts";
    {
        auto e = engine_on("cpu", elsewhere);
        EXPECT_EQ(generate(*e, "Once upon a time", greedy(60)).tokens, want) << "experts streamed to the device";
        EXPECT_TRUE(e->hybrid().expert_layers.empty());
        const auto notes = e->memory_plan().notes;
        EXPECT_TRUE(std::any_of(notes.begin(), notes.end(), [](const std::string &n) {
            return n.find("'cpu_without_experts' cannot compute the experts") != std::string::npos;
        })) << "the plan says why the experts stream";
    }
    offload_options insisting = elsewhere;
    insisting.offload_compute = "cpu";
    refused("cpu", insisting, {"cpu_without_experts"});
}

TEST(PlacementInvariance, TooSmallABudgetIsAClearErrorNamingTheKnob) {
    offload_options o;
    o.device_memory = 1ull << 20; // 1 MiB cannot even hold the overhead
    try {
        make_engine(shared_path("models/stories260K-f32.gguf"), 256, 16, o);
        FAIL() << "expected the plan to be refused";
    } catch (const std::exception &e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("does not fit"), std::string::npos) << msg;
        EXPECT_NE(msg.find("--device-memory"), std::string::npos) << msg;
    }
}

TEST(PlacementInvariance, StreamingCountsBytesPerTierAndReturnsTheRingToRest) {
    offload_options s = layers(5);
    s.stream_weights = true;
    s.prefetch_depth = 1;
    auto e = make_engine(shared_path("models/stories260K-f32.gguf"), 256, 16, s);
    generate(*e, "Once upon a time", greedy(20));
    const auto st = e->offload_stats();
    ASSERT_EQ(st.tiers.count("numa_ram"), 1u);
    EXPECT_GT(st.tiers.at("numa_ram").bytes_read, 0u);
    EXPECT_GT(st.forwards, 0u);
    // 5 streamed layers through 2 slots: every layer is reloaded each token (no slot has a single occupant).
    EXPECT_GE(st.layer_loads, st.forwards * 4);
    EXPECT_NE(e->offload_report().find("numa_ram"), std::string::npos);
}

} // namespace
