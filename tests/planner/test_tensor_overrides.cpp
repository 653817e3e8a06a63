// llama.cpp's -ot PATTERN=TARGET in the planner: tensors placed by name, whatever their layer, with hand-checkable
// sizes from small_model (layers of 60 MiB attn + 40 MiB ffn).
#include "common/error.hpp"
#include "planner_test_model.hpp"

#include <gtest/gtest.h>

#include <algorithm>

using namespace strata::planner;
using namespace strata::planner::test;

namespace {

bool any_contains(const std::vector<std::string> &lines, const std::string &part) {
    return std::any_of(lines.begin(), lines.end(), [&](const std::string &l) { return l.find(part) != std::string::npos; });
}

std::string error_of(const inputs &in) {
    try {
        make_plan(in);
    } catch (const strata::error &e) {
        return e.what();
    }
    return "";
}

} // namespace

TEST(TensorOverrides, MatchingTensorsLeaveTheDeviceWhateverTheirLayer) {
    auto in = small_model();
    in.tensor_overrides = {{"blk\\.[0-2]\\.ffn", "nvme"}}; // the FFNs of the first three layers
    const plan p = make_plan(in);
    ASSERT_TRUE(p.fits) << p.problems.front();
    for (int l = 0; l < 3; ++l) {
        EXPECT_EQ(find(p, fmt::format("blk.{}.ffn", l)).home, "nvme");
        EXPECT_EQ(find(p, fmt::format("blk.{}.ffn", l)).how, mode::streamed);
        EXPECT_EQ(find(p, fmt::format("blk.{}.attn", l)).home, "device");
    }
    EXPECT_EQ(find(p, "blk.3.ffn").home, "device");
    EXPECT_EQ(p.offloaded_bytes, 120 * MiB);
    EXPECT_EQ(p.offloaded_layers, 3);
    EXPECT_EQ(p.tier_used.at("nvme"), 120 * MiB);
    EXPECT_EQ(p.staging_ring_bytes, 3 * 40 * MiB); // (prefetch_depth 2 + 1) x the largest streamed part of a layer
}

TEST(TensorOverrides, DeviceKeepsTensorsOfOffloadedLayersAndTheFirstMatchWins) {
    auto in = small_model();
    in.cpu_offload_layers = 2; // layers 6 and 7 leave
    in.tensor_overrides = {{"blk\\.7\\.attn", "device"}, {"attn", "nvme"}};
    const plan p = make_plan(in);
    ASSERT_TRUE(p.fits);
    EXPECT_EQ(find(p, "blk.7.attn").home, "device"); // the first pattern placed it
    EXPECT_EQ(find(p, "blk.7.ffn").home, "nvme");
    EXPECT_EQ(find(p, "blk.6.ffn").home, "nvme");
    EXPECT_EQ(find(p, "blk.0.attn").home, "nvme"); // the second pattern, whatever the layer choice
    EXPECT_EQ(find(p, "blk.0.ffn").home, "device");
    EXPECT_EQ(p.offloaded_bytes, (7 * 60 + 2 * 40) * MiB);
}

TEST(TensorOverrides, ANamedTierIsUsedEvenWhenAFasterOneHasRoom) {
    auto in = small_model();
    in.tiers.insert(in.tiers.begin(), tier_info{"numa_ram", 10 * GiB, 10e9, true});
    in.cpu_offload_layers = 1;
    in.tensor_overrides = {{"blk\\.0\\.", "nvme"}};
    const plan p = make_plan(in);
    EXPECT_EQ(find(p, "blk.0.attn").home, "nvme");
    EXPECT_EQ(find(p, "blk.7.attn").home, "numa_ram"); // unmatched tensors fill the tiers as before
    in.tiers[1].capacity = 50 * MiB;                   // nvme too small for blk.0.attn: a problem, not another tier
    EXPECT_TRUE(any_contains(make_plan(in).problems, "weights need"));
}

TEST(TensorOverrides, BadTargetsPatternsAndUnmatchedPatternsAreReported) {
    auto in = small_model();
    in.tensor_overrides = {{"ffn", "numa_ram"}};
    EXPECT_EQ(error_of(in), "override_tensor 'ffn=numa_ram': 'numa_ram' is not device or a configured tier (device, nvme); "
                            "add it to --tiers or fix the name");
    in.tensor_overrides = {{"blk\\.(", "nvme"}};
    EXPECT_NE(error_of(in).find("override_tensor 'blk\\.(=nvme': the pattern is not a valid regular expression"),
              std::string::npos) << error_of(in);
    in.tensor_overrides = {{"exps", "nvme"}};
    EXPECT_TRUE(any_contains(make_plan(in).notes, "override_tensor 'exps=nvme' matches no tensor"));
    // The embedding cannot be streamed (only layers go through the ring).
    in.tensor_overrides = {{"token_embd", "nvme"}};
    EXPECT_TRUE(any_contains(make_plan(in).problems, "only layer weights are streamed"));
}

TEST(TensorOverrides, ALayerWithATensorOnTheDeviceIsNeverComputedOnTheCpu) {
    auto in = small_model();
    in.tiers = {tier_info{"numa_ram", 10 * GiB, 10e9, true}};
    in.device_reads_host = false; // a GPU: RAM-tier layers are streamed, or computed on the CPU (hybrid)
    in.cpu_offload_layers = 2;
    in.tensor_overrides = {{"blk\\.7\\.attn", "device"}};
    in.on_cpu_layers = {6, 7};
    const plan p = make_plan(in);
    EXPECT_EQ(find(p, "blk.6.ffn").how, mode::on_cpu);
    EXPECT_EQ(find(p, "blk.7.ffn").how, mode::streamed); // its attn is in device memory, out of the CPU's reach
}
