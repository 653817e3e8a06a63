// The hybrid placement decision (hybrid_policy.hpp) from measured link and CPU speeds: which offloaded layers the CPU
// computes, and the batch size from which they stream instead.
#include "engine/hybrid_policy.hpp"

#include <gtest/gtest.h>

using namespace strata::engine;

namespace {

// Four offloaded layers of 100 MB; the last one in NVMe (the CPU cannot compute on it in place).
hybrid_inputs four_layers(offload_compute mode) {
    hybrid_inputs in;
    in.mode = mode;
    for (int32_t l = 4; l < 8; ++l) in.streamed.push_back({l, 100'000'000, l != 7});
    in.h2d_bytes_per_second = 25e9;  // 40 ps/byte over the link
    in.cpu_fixed_s_per_byte = 10e-12; // a 100 GB/s matrix-vector product
    in.cpu_token_s_per_byte = 2e-12;  // each further token
    return in;
}

std::string all_notes(const hybrid_decision &d) {
    std::string out;
    for (const auto &n : d.notes) out += n + "\n";
    return out;
}

} // namespace

TEST(HybridPolicy, AutoComputesOnTheCpuWhenOneTokenIsCheaperThanTheLinkAndStreamsNvmeLayers) {
    const hybrid_decision d = decide_hybrid(four_layers(offload_compute::auto_choose));
    EXPECT_EQ(d.host_layers, (std::vector<int32_t>{4, 5, 6}));
    // 10 + 2n >= 40 from n = 15.
    EXPECT_EQ(d.min_batch, 15);
    EXPECT_NE(all_notes(d).find("layers 4-6 computed on the CPU"), std::string::npos) << all_notes(d);
    EXPECT_NE(all_notes(d).find("layer 7 not wholly in a tier the CPU can compute on"), std::string::npos)
        << all_notes(d);
}

TEST(HybridPolicy, AutoStreamsWhenTheLinkIsFaster) {
    hybrid_inputs in = four_layers(offload_compute::auto_choose);
    in.h2d_bytes_per_second = 200e9; // 5 ps/byte: cheaper than the CPU's 12
    const hybrid_decision d = decide_hybrid(in);
    EXPECT_TRUE(d.host_layers.empty());
    EXPECT_NE(all_notes(d).find("streaming them"), std::string::npos) << all_notes(d);
}

TEST(HybridPolicy, AutoWithoutMeasurementsStreams) {
    hybrid_inputs in = four_layers(offload_compute::auto_choose);
    in.h2d_bytes_per_second = 0;
    EXPECT_TRUE(decide_hybrid(in).host_layers.empty());
}

TEST(HybridPolicy, DeviceModeNeverUsesTheCpu) {
    EXPECT_TRUE(decide_hybrid(four_layers(offload_compute::device)).host_layers.empty());
}

TEST(HybridPolicy, CpuModeIsForcedEvenWhenTheLinkIsFasterAndKeepsUserThresholds) {
    hybrid_inputs in = four_layers(offload_compute::cpu);
    in.h2d_bytes_per_second = 200e9;
    in.min_batch = 64;
    hybrid_decision d = decide_hybrid(in);
    EXPECT_EQ(d.host_layers, (std::vector<int32_t>{4, 5, 6}));
    EXPECT_EQ(d.min_batch, 64);
    in.op_offload = false; // --no-op-offload
    d = decide_hybrid(in);
    EXPECT_EQ(d.min_batch, 0);
    // Unmeasured: llama.cpp's default threshold.
    in = four_layers(offload_compute::cpu);
    in.h2d_bytes_per_second = 0;
    in.cpu_fixed_s_per_byte = in.cpu_token_s_per_byte = 0;
    EXPECT_EQ(decide_hybrid(in).min_batch, k_default_op_offload_min_batch);
}

TEST(HybridPolicy, OnlyNvmeLayersMeansNothingOnTheCpu) {
    hybrid_inputs in = four_layers(offload_compute::cpu);
    for (auto &l : in.streamed) l.host_readable = false;
    const hybrid_decision d = decide_hybrid(in);
    EXPECT_TRUE(d.host_layers.empty());
    EXPECT_EQ(d.min_batch, 0);
}

TEST(HybridPolicy, ParseNamesTheKeyAndTheChoices) {
    EXPECT_EQ(parse_offload_compute("cpu"), offload_compute::cpu);
    EXPECT_EQ(parse_offload_compute("device"), offload_compute::device);
    EXPECT_EQ(parse_offload_compute("auto"), offload_compute::auto_choose);
    try {
        parse_offload_compute("gpu");
        FAIL() << "'gpu' is not a valid choice";
    } catch (const std::exception &e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("offload_compute"), std::string::npos) << msg;
        EXPECT_NE(msg.find("auto, device, cpu"), std::string::npos) << msg;
    }
}

// The activation copies cost a fixed time per CPU layer: a small layer whose copies outweigh its streaming stays
// streamed while large ones go to the CPU, and the threshold is the smallest over the CPU layers.
TEST(HybridPolicy, CopyLatencyIsChargedPerLayerSoSmallLayersStream) {
    hybrid_inputs in = four_layers(offload_compute::auto_choose);
    in.streamed[0].bytes = 1'000'000; // 40 us streamed vs 12 us + 4 x 20 us on the CPU
    in.streamed[1].bytes = 50'000'000;
    in.link_latency_s = 20e-6;
    const hybrid_decision d = decide_hybrid(in);
    EXPECT_EQ(d.host_layers, (std::vector<int32_t>{5, 6}));
    // Layer 5: 2 ms streamed vs 0.5 ms + 80 us + n x 0.1 ms: from n = 15 (14.2 rounded up); layer 6: 14.6 -> 15.
    EXPECT_EQ(d.min_batch, 15);
    in.link_latency_s = 2e-3; // copies alone cost more than any layer's transfer
    EXPECT_TRUE(decide_hybrid(in).host_layers.empty());
}

TEST(HybridPolicy, OnlyNvmeLayersSaySoInsteadOfUnknownSpeeds) {
    hybrid_inputs in = four_layers(offload_compute::auto_choose);
    for (auto &l : in.streamed) l.host_readable = false;
    in.h2d_bytes_per_second = 0;
    const hybrid_decision d = decide_hybrid(in);
    EXPECT_TRUE(d.host_layers.empty());
    EXPECT_NE(all_notes(d).find("layers 4-7 not wholly in a tier"), std::string::npos) << all_notes(d);
    EXPECT_EQ(all_notes(d).find("unknown"), std::string::npos) << all_notes(d);
}
