// Pipeline parallel in one process (#16 item 2): N workers, each running a contiguous range of the layers over KV
// blocks that hold only its layers, the residual stream passing rank to rank every step. The greedy tokens must be
// one process's bit for bit — stories260K and a GQA Q8_0 model with a q8_0 KV cache, from two ranks to one per layer,
// sixteen sequences under forced preemption (swap and recompute), on the CPU and on the GPU stand-in (a device with
// memory of its own) — with every pool full again after. The ranks' shares of a block joined are the whole block, so
// a prefix the ranks saved in the persistent store is read back by one process, and the other way round.
#include "engine/worker.hpp"
#include "engine_fixture.hpp"
#include "model_file/open_model_file.hpp"

#include <strata/kv_layout.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

using namespace strata;
using namespace strata::testing;
namespace fs = std::filesystem;

namespace {

struct pipeline_case {
    const char *name;
    bool made;                    // the GQA Q8_0 make-model Llama with a q8_0 KV cache, else stories260K in float32
    std::vector<int32_t> layers;  // layers per rank (pipeline_layer_partition)
    int32_t n_ranks() const { return static_cast<int32_t>(layers.size()); }
};

void PrintTo(const pipeline_case &c, std::ostream *os) { *os << c.name << " x" << c.n_ranks(); }

std::string model_of(const pipeline_case &c) {
    if (!c.made) return shared_path("models/stories260K-f32.gguf");
    return made_model("pipeline-llama-q8_0.gguf",
                      "--dim 128 --layers 4 --heads 4 --kv-heads 2 --ff 256 --ctx 256 --type q8_0 --seed 5 "
                      "--vocab-from " + shared_path("models/vocab/ggml-vocab-llama-spm.gguf"));
}

// The largest rank's share of a 16-token KV block (kv_cache_memory is per device, as vLLM's): stories260K has 5
// layers of 2 x 16 rows of 32 float32 values (4 KiB a layer), the made model 4 layers of 2 x 16 rows of 64 values in
// q8_0 (two 34-byte groups a row).
uint64_t largest_share(const pipeline_case &c, const std::vector<int32_t> &layers) {
    const int32_t most = *std::max_element(layers.begin(), layers.end());
    return c.made ? kv_layout::block_bytes(most, 16, 64, STRATA_KV_Q8_0) : kv_layout::block_bytes(most, 16, 32, STRATA_KV_F32);
}

// n_blocks of KV in the tightest rank; `layers` per rank (one rank: {n_layer}).
engine::engine_options options(const pipeline_case &c, uint64_t n_blocks, engine::preemption_mode mode,
                               const std::vector<int32_t> &layers) {
    engine::engine_options o = batching_options(model_of(c), n_blocks * largest_share(c, layers), mode,
                                                mode == engine::preemption_mode::swap ? 0.01 : 0);
    if (c.made) o.kv.kv_type = STRATA_KV_Q8_0;
    o.pipeline_parallel_size = static_cast<int32_t>(layers.size());
    if (layers.size() > 1) o.pipeline_layer_partition = layers;
    return o;
}

class PipelineParallel : public ::testing::TestWithParam<pipeline_case> {};

} // namespace

TEST_P(PipelineParallel, RanksGiveOneProcessesGreedyTokensUnderPreemptionOnBothDeviceKinds) {
    const pipeline_case &c = GetParam();
    ASSERT_FALSE(model_of(c).empty()) << "make-model failed";
    constexpr int n = 16;
    constexpr int32_t max_tokens = 40;
    std::vector<std::vector<int32_t>> prompts, want;
    {
        auto one = engine_from(options(c, 256, engine::preemption_mode::recompute, {c.made ? 4 : 5}));
        for (int i = 0; i < n; ++i) prompts.push_back(story_prompt(*one, i));
        want = run_all(*one, prompts, max_tokens);
    }
    for (const bool separate_memory : {false, true}) {
        for (auto mode : {engine::preemption_mode::swap, engine::preemption_mode::recompute}) {
            SCOPED_TRACE(std::string(separate_memory ? "GPU stand-in" : "CPU") +
                         (mode == engine::preemption_mode::swap ? ", swap" : ", recompute"));
            cpu_table gpu;
            auto o = options(c, 16, mode, c.layers); // 16 blocks (one max_model_len sequence) for 16 sequences of ~4
            if (separate_memory) o.device_config = &gpu.view;
            auto e = engine_from(o);
            ASSERT_EQ(e->pipeline_stages().size(), c.layers.size());
            for (size_t r = 0; r < c.layers.size(); ++r)
                EXPECT_EQ(e->pipeline_stages()[r].layer_end - e->pipeline_stages()[r].layer_first, c.layers[r]);
            const auto got = run_all(*e, prompts, max_tokens);
            for (int i = 0; i < n; ++i)
                EXPECT_EQ(got[static_cast<size_t>(i)], want[static_cast<size_t>(i)]) << "sequence " << i;
            const strata_engine_stats s = e->stats();
            EXPECT_EQ(s.kv_blocks_total[0], 16) << "the tightest rank holds 16 blocks";
            EXPECT_GT(mode == engine::preemption_mode::swap ? s.preemptions_swap : s.preemptions_recompute, 0)
                << "the KV budget was meant to force preemption";
            if (mode == engine::preemption_mode::swap) {
                EXPECT_GT(s.kv_bytes_swapped_out, 0);
                EXPECT_EQ(s.kv_bytes_swapped_in, s.kv_bytes_swapped_out) << "every swapped block came back";
            }
            expect_pools_full(*e);
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Ranks, PipelineParallel,
                         ::testing::Values(pipeline_case{"stories260K", false, {2, 3}},
                                           pipeline_case{"stories260K", false, {1, 2, 2}},
                                           pipeline_case{"stories260K", false, {1, 1, 1, 1, 1}},
                                           pipeline_case{"q8_0", true, {1, 3}}, pipeline_case{"q8_0", true, {1, 1, 1, 1}}),
                         [](const auto &info) {
                             return std::string(info.param.name) + "_" + std::to_string(info.param.n_ranks()) + "_ranks";
                         });

// A prefix saved by two ranks (each writing its layers' share of every block) is the whole block: one process reads
// it back from the store and answers with the tokens of a miss, and a prefix one process saved serves two ranks.
TEST(PipelineParallelPrefix, APrefixSavedByRanksIsReadByOneProcessAndTheOtherWayRound) {
    const pipeline_case c{"stories260K", false, {2, 3}};
    const int32_t max_tokens = 24;
    auto opts = [&](int32_t n_ranks, const fs::path &dir) {
        auto o = options(c, 64, engine::preemption_mode::recompute, n_ranks == 1 ? std::vector<int32_t>{5} : c.layers);
        o.kv.enable_prefix_caching = true;
        o.kv.prefix_store_dir = dir.string();
        o.kv.prefix_store_gib = 0.01;
        return o;
    };
    std::vector<int32_t> p, miss;
    {
        auto plain = engine_from(options(c, 64, engine::preemption_mode::recompute, {5}));
        p = plain->tokenizer().encode("Once upon a time there was a little girl named Lily. She loved to play outside "
                                      "in the park with her friends and her dog.",
                                      true);
        ASSERT_GE(p.size(), 33u);
        miss = run_all(*plain, {p}, max_tokens)[0];
    }
    for (const auto &[writer, reader] : {std::pair{2, 1}, std::pair{1, 2}}) {
        SCOPED_TRACE("saved by " + std::to_string(writer) + " rank(s), read by " + std::to_string(reader));
        const fs::path dir = fs::path(STRATA_BINARY_DIR) / ("test-pipeline-prefix-" + std::to_string(::getpid()));
        fs::remove_all(dir);
        {
            auto w = engine_from(opts(writer, dir));
            EXPECT_EQ(w->pipeline_stages().size(), static_cast<size_t>(writer));
            EXPECT_EQ(run_all(*w, {p}, max_tokens)[0], miss);
        } // a clean shutdown writes the cached prefixes to the store
        {
            auto r = engine_from(opts(reader, dir));
            EXPECT_EQ(r->pipeline_stages().size(), static_cast<size_t>(reader));
            EXPECT_EQ(run_all(*r, {p}, max_tokens)[0], miss);
            EXPECT_GE(r->stats().prefix_hits[2], 32) << "the prefix came from the persistent store";
            expect_pools_full(*r);
        }
        fs::remove_all(dir);
    }
}

// Without a partition the ranks are balanced by bytes: the made model's tied embedding (32000 x 128 in Q8_0, 4.3 MiB
// against 0.2 MiB a layer) weighs on the first rank and, as its classifier, on the last, so two ranks take two layers
// each and four take one each; the tokens are one process's. More ranks than layers are refused.
TEST(PipelineParallelSplit, RanksAreBalancedByBytesAndMoreRanksThanLayersAreRefused) {
    const pipeline_case c{"q8_0", true, {4}};
    ASSERT_FALSE(model_of(c).empty()) << "make-model failed";
    std::vector<std::vector<int32_t>> prompts, want;
    {
        auto one = engine_from(options(c, 256, engine::preemption_mode::recompute, {4}));
        for (int i = 0; i < 4; ++i) prompts.push_back(story_prompt(*one, i));
        want = run_all(*one, prompts, 16);
    }
    for (const auto &[n_ranks, want_ranges] : {std::pair{2, std::string("[0,2)[2,4)")},
                                               std::pair{4, std::string("[0,1)[1,2)[2,3)[3,4)")}}) {
        auto o = options(c, 256, engine::preemption_mode::recompute, {1, 3});
        o.pipeline_parallel_size = n_ranks;
        o.pipeline_layer_partition.clear();
        auto e = engine_from(o);
        std::string got_ranges;
        for (const auto &s : e->pipeline_stages())
            got_ranges += "[" + std::to_string(s.layer_first) + "," + std::to_string(s.layer_end) + ")";
        EXPECT_EQ(got_ranges, want_ranges);
        EXPECT_EQ(run_all(*e, prompts, 16), want) << n_ranks << " ranks";
    }
    const pipeline_case stories{"stories260K", false, {1, 1, 1, 1, 1, 1}};
    try {
        auto o = options(stories, 64, engine::preemption_mode::recompute, stories.layers);
        o.pipeline_layer_partition.clear();
        engine_from(o);
        FAIL() << "six ranks for five layers started";
    } catch (const std::exception &e) {
        EXPECT_NE(std::string(e.what()).find("pipeline_parallel_size 6 must be between 1 and the model's 5 layers"), std::string::npos)
            << e.what();
    }
}

// Each rank's memory plan is its own (#16 item 2): only its layers' tensors, numbered from 0, the embedding on the
// first rank and the final norm and classifier on the last (the embedding again when the classifier is tied), and the
// KV of its layers only; a rank reads nothing else of the file.
TEST(PipelineParallelPlan, EachRankPlansOnlyItsLayersWithTheEmbeddingFirstAndTheClassifierLastInItsShareOfTheDevice) {
    const pipeline_case c{"q8_0", true, {4}};
    const std::string model = model_of(c);
    ASSERT_FALSE(model.empty()) << "make-model failed";
    engine::engine_options o = options(c, 64, engine::preemption_mode::recompute, {4});
    // The ranks share this process's device: each plans 1/N of it.
    constexpr uint64_t device_total = uint64_t{1} << 30;
    o.offload.device_total = device_total;
    const auto file = open_model_file(model);
    const auto arch = test_registry().find_model_arch_for("llama");
    ASSERT_NE(arch.desc, nullptr);
    for (const auto &[n_ranks, ranges] : {std::pair{2, std::vector<std::pair<int, int>>{{0, 2}, {2, 4}}},
                                          std::pair{3, std::vector<std::pair<int, int>>{{0, 1}, {1, 2}, {2, 4}}}}) {
        for (int32_t r = 0; r < n_ranks; ++r) {
            const auto [first, end] = ranges[static_cast<size_t>(r)];
            SCOPED_TRACE("rank " + std::to_string(r) + " of " + std::to_string(n_ranks));
            engine::worker w(test_registry(), test_host(), o, *file, arch);
            w.init_device();
            w.load_model();
            w.set_stage({r, n_ranks, first, end});
            w.place_weights(o.offload, o.max_model_len);
            const auto &plan = w.memory_plan();
            EXPECT_EQ(plan.device_budget, device_total / static_cast<uint64_t>(n_ranks));
            bool embedding = false, classifier = false;
            int32_t layer_tensors = 0;
            for (const auto &p : plan.placements) {
                int layer = -1;
                if (std::sscanf(p.tensor.c_str(), "blk.%d.", &layer) == 1) {
                    EXPECT_GE(layer, first) << p.tensor;
                    EXPECT_LT(layer, end) << p.tensor;
                    EXPECT_EQ(p.layer, layer - first) << p.tensor << ": numbered within the rank";
                    ++layer_tensors;
                } else if (p.tensor == "token_embd.weight") {
                    embedding = true;
                } else if (p.tensor == "output_norm.weight" || p.tensor == "output.weight") {
                    classifier = true;
                } else {
                    ADD_FAILURE() << "unexpected tensor " << p.tensor;
                }
            }
            EXPECT_EQ(layer_tensors, (end - first) * 9) << "norms, q, k, v, o, ffn norm, gate, up, down per layer";
            EXPECT_EQ(classifier, end == 4);
            const bool tied = file->find_tensor("output.weight") == nullptr;
            EXPECT_EQ(embedding, first == 0 || (end == 4 && tied));
            EXPECT_EQ(plan.kv_bytes_per_token, kv_layout::block_bytes(end - first, 1, 64, STRATA_KV_Q8_0));
            EXPECT_EQ(w.kv_block_bytes(), kv_layout::block_bytes(end - first, 16, 64, STRATA_KV_Q8_0));
        }
    }
}

// A device with memory of its own gives each pipeline stage a device of its own (ABI 1.28, strata_device_create_args
// .pipeline_rank: cuda a GPU each), so a stage started for its rank plans the whole device; a stage on a device not
// told its rank (or of an older minor) shares one device with the others and plans 1/N of it, as on the CPU above.
TEST(PipelineParallelPlan, AStageStartedForItsRankOnADeviceWithMemoryOfItsOwnPlansTheWholeDevice) {
    const pipeline_case c{"q8_0", true, {4}};
    const std::string model = model_of(c);
    ASSERT_FALSE(model.empty()) << "make-model failed";
    cpu_table gpu; // the GPU stand-in
    engine::engine_options o = options(c, 64, engine::preemption_mode::recompute, {4});
    o.device_config = &gpu.view;
    const auto file = open_model_file(model);
    const auto arch = test_registry().find_model_arch_for("llama");
    ASSERT_NE(arch.desc, nullptr);
    auto budget_of_whole_model = [&](uint64_t device_total) {
        engine::engine_options whole = o;
        whole.offload.device_total = device_total;
        engine::worker w(test_registry(), test_host(), whole, *file, arch);
        w.init_device();
        w.load_model();
        w.place_weights(whole.offload, whole.max_model_len);
        return w.memory_plan().device_budget;
    };
    constexpr uint64_t device_total = uint64_t{1} << 30;
    o.offload.device_total = device_total;
    const uint64_t whole = budget_of_whole_model(device_total), half = budget_of_whole_model(device_total / 2);
    ASSERT_LT(half, whole);
    for (const bool told : {true, false}) {
        for (int32_t r = 0; r < 2; ++r) {
            SCOPED_TRACE(std::string(told ? "started for its rank" : "not told its rank") + ", rank " + std::to_string(r));
            engine::worker w(test_registry(), test_host(), o, *file, arch);
            if (told) w.init_device(r, 2);
            else w.init_device();
            w.load_model();
            w.set_stage({r, 2, 2 * r, 2 * r + 2});
            EXPECT_EQ(w.has_device_per_stage(), told);
            w.place_weights(o.offload, o.max_model_len);
            EXPECT_EQ(w.memory_plan().device_budget, told ? whole : half);
        }
    }
    // A stage is run on the device started for it.
    engine::worker w(test_registry(), test_host(), o, *file, arch);
    w.init_device(1, 2);
    w.load_model();
    try {
        w.set_stage({0, 2, 0, 2});
        ADD_FAILURE() << "a stage on the device of another was accepted";
    } catch (const std::exception &e) {
        EXPECT_NE(std::string(e.what()).find("pipeline rank 0 of 2 on a device started for rank 1 of 2"),
                  std::string::npos) << e.what();
    }
    // The CPU device shares its RAM among the stages whatever it is told.
    engine::engine_options cpu = o;
    cpu.device_config = nullptr;
    engine::worker c0(test_registry(), test_host(), cpu, *file, arch);
    c0.init_device(0, 2);
    EXPECT_FALSE(c0.has_device_per_stage());
}

namespace {

// The build's plugins and a device above the CPU that never starts (tests/model/fixtures/layout_refusing_device.cpp):
// it cannot run one stage here, and refuses pipeline ranks or replicas as cuda refuses more GPUs than are visible.
plugins::registry &registry_with_layout_refusing_device() {
    static plugins::registry r = [] {
        plugins::registry reg(test_host());
        reg.load_directory(STRATA_PLUGIN_DIR);
        reg.load_directory(STRATA_DEVICE_FIXTURE_DIR);
        return reg;
    }();
    return r;
}

} // namespace

// device = "auto" goes on to the CPU past a device that cannot run here, but not past one that runs here and refuses
// what it was asked (its pipeline ranks or replicas): the CPU would run another layout than the one asked for, slower.
TEST(PipelineParallelPlan, AutoStopsAtADeviceThatRefusesTheRanksInsteadOfFallingBackToTheCpu) {
    const pipeline_case c{"q8_0", true, {4}};
    const std::string model = model_of(c);
    ASSERT_FALSE(model.empty()) << "make-model failed";
    plugins::registry &reg = registry_with_layout_refusing_device();
    ASSERT_NE(reg.find_device("layout_fixture").desc, nullptr);
    // On a machine where another device (a GPU) runs, `auto` rightly takes that one: the fixture is not reached.
    for (const std::string &name : reg.names(STRATA_KIND_DEVICE))
        if (name != "cpu" && name != "layout_fixture" && reg.find_device(name).desc->score() > 0)
            GTEST_SKIP() << "device '" << name << "' runs on this machine and scores above the fixture device";
    engine::engine_options o = options(c, 64, engine::preemption_mode::recompute, {4});
    o.device = "auto";
    const auto file = open_model_file(model);
    const auto arch = reg.find_model_arch_for("llama");
    ASSERT_NE(arch.desc, nullptr);
    {
        engine::worker w(reg, test_host(), o, *file, arch);
        w.init_device();
        EXPECT_EQ(w.device_name(), "cpu");
    }
    auto refusal = [&](const engine::engine_options &opts, int32_t rank, int32_t n_ranks) {
        engine::worker w(reg, test_host(), opts, *file, arch);
        try {
            w.init_device(rank, n_ranks);
        } catch (const std::exception &e) {
            return std::string(e.what());
        }
        return "started on '" + w.device_name() + "'";
    };
    for (int32_t r = 0; r < 2; ++r) {
        const std::string what = refusal(o, r, 2);
        SCOPED_TRACE("rank " + std::to_string(r) + ": " + what);
        EXPECT_NE(what.find("device = \"auto\": 'layout_fixture' can run on this machine but refused this "
                            "configuration"), std::string::npos);
        EXPECT_NE(what.find("1 replica(s) of 2 pipeline stage(s) need 2 accelerators"), std::string::npos);
        EXPECT_NE(what.find("or set [engine] device = \"cpu\" (--device cpu) to run without it"), std::string::npos);
    }
    engine::engine_options replicas = o;
    replicas.data_parallel_size = 2;
    const std::string what = refusal(replicas, 0, 1);
    EXPECT_NE(what.find("2 replica(s) of 1 pipeline stage(s) need 2 accelerators"), std::string::npos) << what;
    // Named, the CPU runs the ranks.
    engine::engine_options cpu = o;
    cpu.device = "cpu";
    EXPECT_EQ(refusal(cpu, 1, 2), "started on 'cpu'");
}
