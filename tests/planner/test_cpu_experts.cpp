// Experts on the CPU in the planner (llama.cpp's --n-cpu-moe / -ot exps=CPU on a GPU): routed expert tensors that the
// device would stream from host RAM are computed there by the CPU instead (mode cpu_experts), and the plan table gives
// them rows of their own. Sizes by hand: each of 4 layers has attention 60 MiB, a router 1 MiB and experts 3 x 100 MiB.
#include "planner/plan_report.hpp"
#include "planner_test_model.hpp"

#include <gtest/gtest.h>

using namespace strata::planner;
using namespace strata::planner::test;

namespace {

inputs moe_model() {
    inputs in = small_model(4);
    in.tensors.clear();
    in.tensors.push_back({"token_embd.weight", -1, 50 * MiB});
    for (int32_t l = 0; l < 4; ++l) {
        in.tensors.push_back({fmt::format("blk.{}.attn", l), l, 60 * MiB});
        in.tensors.push_back({fmt::format("blk.{}.ffn_gate_inp.weight", l), l, 1 * MiB});
        for (const char *part : {"gate", "up", "down"})
            in.tensors.push_back({fmt::format("blk.{}.ffn_{}_exps.weight", l, part), l, 100 * MiB, true});
    }
    in.tensors.push_back({"output.weight", 4, 50 * MiB});
    in.tiers = {tier_info{"numa_ram", 10 * GiB, 10e9, true}};
    in.device_reads_host = false; // a GPU
    // --n-cpu-moe 2 as plan_inputs writes it
    in.tensor_overrides = {{"blk\\.0\\.ffn_(up|down|gate)_(ch|)exps", "numa_ram"},
                           {"blk\\.1\\.ffn_(up|down|gate)_(ch|)exps", "numa_ram"}};
    return in;
}

} // namespace

TEST(CpuExperts, ExpertsInHostRamAreComputedThereAndTakeNoRing) {
    inputs in = moe_model();
    in.experts_on_cpu = true;
    const plan p = make_plan(in);
    ASSERT_TRUE(p.fits) << p.problems.front();
    for (int l = 0; l < 2; ++l) {
        EXPECT_EQ(find(p, fmt::format("blk.{}.ffn_up_exps.weight", l)).home, "numa_ram");
        EXPECT_EQ(find(p, fmt::format("blk.{}.ffn_up_exps.weight", l)).how, mode::cpu_experts);
        EXPECT_EQ(find(p, fmt::format("blk.{}.ffn_gate_inp.weight", l)).home, "device"); // the router stays
        EXPECT_EQ(find(p, fmt::format("blk.{}.attn", l)).home, "device");
    }
    EXPECT_EQ(find(p, "blk.2.ffn_up_exps.weight").home, "device");
    EXPECT_EQ(p.staging_ring_bytes, 0u); // nothing crosses the link per step
    EXPECT_EQ(p.on_cpu_ring_bytes, 0u);
    EXPECT_EQ(p.offloaded_bytes, 600 * MiB);
    EXPECT_EQ(p.tier_used.at("numa_ram"), 600 * MiB);
    EXPECT_EQ(p.device_weights, (50 + 4 * 61 + 2 * 300 + 50) * MiB);
}

TEST(CpuExperts, WithoutTheCpuTheExpertsStreamThroughTheRing) {
    const plan p = make_plan(moe_model());
    ASSERT_TRUE(p.fits);
    EXPECT_EQ(find(p, "blk.0.ffn_up_exps.weight").how, mode::streamed);
    EXPECT_EQ(p.staging_ring_bytes, 3 * 300 * MiB); // (prefetch_depth 2 + 1) x a layer's experts
}

TEST(CpuExperts, AWholeLayerOnTheCpuTakesItsExpertsAlong) {
    inputs in = moe_model();
    in.experts_on_cpu = true;
    in.cpu_offload_layers = 1; // layer 3 leaves whole
    in.tensor_overrides = {{"ffn_(up|down|gate)_exps", "numa_ram"}};
    in.on_cpu_layers = {3};
    const plan p = make_plan(in);
    ASSERT_TRUE(p.fits);
    EXPECT_EQ(find(p, "blk.3.attn").how, mode::on_cpu);
    EXPECT_EQ(find(p, "blk.3.ffn_down_exps.weight").how, mode::on_cpu); // one mode for the whole layer
    EXPECT_EQ(find(p, "blk.2.ffn_down_exps.weight").how, mode::cpu_experts);
    EXPECT_EQ(p.on_cpu_ring_bytes, 3 * 361 * MiB); // large batches stream layer 3 whole, its experts included
    EXPECT_EQ(p.staging_ring_bytes, 0u);
}

TEST(CpuExperts, ThePlanTableGivesTheExpertsRowsOfTheirOwn) {
    inputs in = moe_model();
    in.experts_on_cpu = true;
    const plan p = make_plan(in);
    const auto groups = group_layers(p, in);
    std::vector<std::string> rows;
    for (const auto &g : groups) rows.push_back(fmt::format("{}|{}|{}|{}", g.what, g.home, to_string(g.how), g.bytes / MiB));
    const std::vector<std::string> want{"embedding|device|resident|50", "layers 0-3|device|resident|244",
                                        "experts 0-1|numa_ram|cpu|600", "experts 2-3|device|resident|600",
                                        "output|device|resident|50"};
    EXPECT_EQ(rows, want);
    EXPECT_TRUE(groups[2].experts);
    EXPECT_FALSE(groups[1].experts);
    const std::string table = to_table(p, in);
    EXPECT_NE(table.find("experts 0-1"), std::string::npos) << table;
    EXPECT_EQ(to_json(p, in)["groups"][2]["experts"], true);
}

TEST(CpuExperts, WhatDoesNotFitPointsAMixtureAtItsExperts) {
    inputs in = moe_model();
    in.tensor_overrides.clear();
    in.device_total = 2 * GiB; // 1.8 GiB at 0.9: the weights alone need 1.5 GiB, the KV of 1024 tokens does not fit
    in.max_model_len = 160 * 1024;
    const plan p = make_plan(in);
    ASSERT_FALSE(p.fits);
    EXPECT_NE(p.problems.front().find("keep experts in host RAM with --n-cpu-moe N / --cpu-moe, or offload layers with "
                                      "--cpu-offload-layers"),
              std::string::npos)
        << p.problems.front();
}
