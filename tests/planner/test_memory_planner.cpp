// Placement and KV capacity of the memory planner against numbers computed by hand.
#include "planner/memory_planner.hpp"
#include "planner_test_model.hpp"

#include <gtest/gtest.h>

#include <cmath>

using namespace strata::planner;
using namespace strata::planner::test;

namespace {

bool contains(const std::vector<std::string> &lines, const std::string &part) {
    for (const auto &l : lines)
        if (l.find(part) != std::string::npos) return true;
    return false;
}

// One 1 MiB tensor per layer and nothing else: the KV cases only care about the KV arithmetic.
inputs kv_model(int32_t n_layer, int32_t n_head_kv, int32_t max_model_len) {
    inputs in;
    in.n_layer = n_layer;
    in.n_head_kv = n_head_kv;
    in.head_dim = 128;
    in.kv_type = STRATA_KV_F16;
    in.max_model_len = max_model_len;
    in.model_context_length = 8192;
    for (int32_t l = 0; l < n_layer; ++l) in.tensors.push_back({fmt::format("blk.{}", l), l, MiB});
    in.activation_bytes = 0;
    in.device_kind = "cpu";
    in.physical_ram = 64 * GiB;
    in.device_total = 64 * GiB;
    return in;
}

uint64_t weights_and_overhead(const inputs &in) { return in.n_layer * MiB + in.overhead_bytes; }

} // namespace

TEST(KvBytes, MhaLlama7bShape) {
    // 2 x 32 layers x 32 heads x 128 x 2 bytes = 512 KiB per token; 2048 tokens = exactly 1 GiB.
    EXPECT_EQ(kv_bytes_per_token(32, 32, 128, STRATA_KV_F16), 512 * 1024u);
    EXPECT_EQ(kv_bytes_per_token(32, 32, 128, STRATA_KV_F16) * 2048, GiB);
}

TEST(KvBytes, GqaUsesKvHeads) {
    // 2 x 32 x 8 x 128 x 2 = 128 KiB per token; 4096 tokens = exactly 512 MiB.
    EXPECT_EQ(kv_bytes_per_token(32, 8, 128, STRATA_KV_F16), 128 * 1024u);
    EXPECT_EQ(kv_bytes_per_token(32, 8, 128, STRATA_KV_F16) * 4096, 512 * MiB);
}

TEST(KvBytes, EachTypeCountsItsRowBytes) {
    // 2 x 32 x 8 x 128 values: 4 bytes each for float32, 1 for FP8, 34 per 32 for q8_0 (17/64 of float32).
    EXPECT_EQ(kv_bytes_per_token(32, 8, 128, STRATA_KV_F32), 256 * 1024u);
    EXPECT_EQ(kv_bytes_per_token(32, 8, 128, STRATA_KV_BF16), 128 * 1024u);
    EXPECT_EQ(kv_bytes_per_token(32, 8, 128, STRATA_KV_FP8_E4M3), 64 * 1024u);
    EXPECT_EQ(kv_bytes_per_token(32, 8, 128, STRATA_KV_Q8_0), 2u * 32 * 8 * 4 * 34);
    EXPECT_EQ(kv_bytes_per_token(32, 8, 128, STRATA_KV_Q8_0) * 64, kv_bytes_per_token(32, 8, 128, STRATA_KV_F32) * 17);
}

TEST(KvBytes, DefaultDtypeIsF32) {
    inputs in;
    EXPECT_EQ(in.kv_type, uint32_t{STRATA_KV_F32});
    EXPECT_EQ(kv_bytes_per_token(1, 1, 1, in.kv_type), 8u);
}

TEST(KvCapacity, MhaExactFitAndOneByteShort) {
    auto in = kv_model(32, 32, 2048);
    in.device_memory = weights_and_overhead(in) + GiB;
    auto p = make_plan(in);
    EXPECT_EQ(p.device_kv, GiB);
    EXPECT_EQ(p.kv_capacity_tokens, 2048);
    EXPECT_TRUE(p.fits) << (p.problems.empty() ? "" : p.problems[0]);

    in.device_memory = *in.device_memory - 1;
    p = make_plan(in);
    EXPECT_EQ(p.kv_capacity_tokens, 2047);
    EXPECT_FALSE(p.fits);
    EXPECT_EQ(p.max_fitting_model_len, 2047);
    EXPECT_EQ(p.max_fitting_concurrency, 0);
}

TEST(KvCapacity, GqaContextThatDoesNotFit) {
    auto in = kv_model(32, 8, 4096);
    in.device_memory = weights_and_overhead(in) + 128 * MiB; // 128 MiB / 128 KiB per token = 1024 tokens
    const auto p = make_plan(in);
    EXPECT_EQ(p.kv_bytes_per_token, 131072u);
    EXPECT_EQ(p.kv_capacity_tokens, 1024);
    EXPECT_FALSE(p.fits);
    EXPECT_EQ(p.max_fitting_model_len, 1024);
    EXPECT_EQ(p.max_fitting_concurrency, 0);
    ASSERT_EQ(p.problems.size(), 1u);
    EXPECT_EQ(p.problems[0], "max_model_len 4096 needs 512.0 MiB of KV cache but only 128.0 MiB is left on the "
                             "device: the largest max_model_len that fits is 1024; lower --max-model-len, raise "
                             "--device-memory, or offload layers with --cpu-offload-layers");
}

TEST(KvCapacity, ConcurrencyThatDoesNotFit) {
    auto in = kv_model(32, 8, 512);
    in.max_num_seqs = 4; // 2048 tokens wanted, 1024 held
    in.device_memory = weights_and_overhead(in) + 128 * MiB;
    const auto p = make_plan(in);
    EXPECT_FALSE(p.fits);
    EXPECT_EQ(p.max_fitting_model_len, 256);
    EXPECT_EQ(p.max_fitting_concurrency, 2);
    ASSERT_EQ(p.problems.size(), 1u);
    EXPECT_NE(p.problems[0].find("max_model_len 512 x max_num_seqs 4 needs 256.0 MiB"), std::string::npos);
    EXPECT_NE(p.problems[0].find("(or 2 sequences of 512)"), std::string::npos);
    EXPECT_NE(p.problems[0].find("--max-num-seqs"), std::string::npos);
}

TEST(KvCapacity, FittingReportsLargestLengthCappedAtTrainedContext) {
    auto in = kv_model(32, 8, 256);
    in.model_context_length = 512;
    in.device_memory = weights_and_overhead(in) + 128 * MiB;
    const auto p = make_plan(in);
    EXPECT_TRUE(p.fits);
    EXPECT_EQ(p.max_fitting_model_len, 512); // 1024 tokens fit, but the model was trained on 512
    EXPECT_EQ(p.max_fitting_concurrency, 4);
}

TEST(KvCapacity, KvCacheMemoryFixesTheKvBytes) {
    auto in = kv_model(32, 8, 512);
    in.device_memory = weights_and_overhead(in) + 128 * MiB;
    in.kv_cache_memory = 64 * MiB;
    auto p = make_plan(in);
    EXPECT_EQ(p.device_kv, 64 * MiB);
    EXPECT_EQ(p.kv_capacity_tokens, 512);
    EXPECT_TRUE(p.fits);

    in.max_model_len = 1024; // 128 MiB of KV wanted, 64 MiB given
    p = make_plan(in);
    EXPECT_FALSE(p.fits);
    EXPECT_TRUE(contains(p.problems, "kv_cache_memory is only 64.0 MiB"));
    EXPECT_TRUE(contains(p.problems, "raise --kv-cache-memory"));

    in.kv_cache_memory = 256 * MiB; // more than the 128 MiB left
    p = make_plan(in);
    EXPECT_FALSE(p.fits);
    EXPECT_EQ(p.device_kv, 128 * MiB);
    EXPECT_TRUE(contains(p.problems, "kv_cache_memory 256.0 MiB does not fit: only 128.0 MiB is left"));
}

TEST(KvCapacity, MaxModelLenZeroMeansTrainedContext) {
    auto in = small_model();
    in.max_model_len = 0;
    const auto p = make_plan(in);
    EXPECT_EQ(p.max_model_len, 2048);
    EXPECT_TRUE(contains(p.notes, "trained context of 2048"));
}

TEST(KvCapacity, WeightsAloneOverflowTheDevice) {
    auto in = kv_model(32, 8, 512);
    in.device_memory = 16 * MiB; // weights alone are 32 MiB
    const auto p = make_plan(in);
    EXPECT_FALSE(p.fits);
    EXPECT_EQ(p.device_kv, 0u);
    EXPECT_EQ(p.kv_capacity_tokens, 0);
    EXPECT_TRUE(contains(p.problems, "but the device budget is 16.0 MiB"));
    EXPECT_TRUE(contains(p.problems, "not even one token per sequence fits"));
}

TEST(DeviceBudget, GpuUtilizationAndLimit) {
    auto in = small_model();
    EXPECT_EQ(make_plan(in).device_budget, 72 * GiB); // 0.9 x 80 GiB
    in.limit_gpu_memory = 16 * GiB;
    EXPECT_EQ(make_plan(in).device_budget, 16 * GiB);
    in.gpu_memory_utilization = 0.5;
    in.limit_gpu_memory = 60 * GiB;
    EXPECT_EQ(make_plan(in).device_budget, 40 * GiB);
}

TEST(DeviceBudget, CpuDefaultsToAllRamAndOffloadsNothing) {
    auto in = small_model();
    in.device_kind = "cpu";
    in.device_total = 32 * GiB;
    const auto p = make_plan(in);
    EXPECT_EQ(p.device_budget, 32 * GiB);
    EXPECT_EQ(p.offloaded_bytes, 0u);
    EXPECT_EQ(p.offloaded_layers, 0);
    EXPECT_EQ(p.device_weights, 900 * MiB);
    EXPECT_EQ(p.staging_ring_bytes, 0u);
    for (const auto &pl : p.placements) {
        EXPECT_EQ(pl.home, "device");
        EXPECT_EQ(pl.how, mode::resident);
    }
}

TEST(DeviceBudget, OtherDeviceKnobsAreNoted) {
    auto in = small_model();
    in.device_memory = 8 * GiB;
    EXPECT_TRUE(contains(make_plan(in).notes, "device_memory applies to the CPU device"));
    in = small_model();
    in.device_kind = "cpu";
    in.gpu_memory_utilization = 0.5;
    const auto p = make_plan(in);
    EXPECT_EQ(p.device_budget, 80 * GiB);
    EXPECT_TRUE(contains(p.notes, "ignored for the CPU device"));
}

TEST(OffloadLayers, OneLayerMovesTheLast) {
    auto in = small_model();
    in.cpu_offload_layers = 1;
    const auto p = make_plan(in);
    EXPECT_EQ(find(p, "blk.7.attn").home, "nvme");
    EXPECT_EQ(find(p, "blk.7.ffn").home, "nvme");
    EXPECT_EQ(find(p, "blk.7.attn").how, mode::streamed);
    EXPECT_EQ(find(p, "blk.6.attn").home, "device");
    EXPECT_EQ(find(p, "token_embd.weight").home, "device");
    EXPECT_EQ(find(p, "output.weight").home, "device");
    EXPECT_EQ(p.offloaded_layers, 1);
    EXPECT_EQ(p.offloaded_bytes, 100 * MiB);
    EXPECT_EQ(p.device_weights, 800 * MiB);
    EXPECT_EQ(p.tier_used.at("nvme"), 100 * MiB);
    EXPECT_TRUE(p.fits);
}

TEST(OffloadLayers, HalfMovesTheSecondHalf) {
    auto in = small_model();
    in.cpu_offload_layers = 4;
    const auto p = make_plan(in);
    for (int l = 0; l < 8; ++l)
        EXPECT_EQ(find(p, fmt::format("blk.{}.ffn", l)).home, l < 4 ? "device" : "nvme") << "layer " << l;
    EXPECT_EQ(p.offloaded_layers, 4);
    EXPECT_EQ(p.offloaded_bytes, 400 * MiB);
    EXPECT_EQ(p.device_weights, 500 * MiB);
}

TEST(OffloadLayers, AllLayersKeepEmbeddingAndOutput) {
    auto in = small_model();
    in.cpu_offload_layers = 8;
    const auto p = make_plan(in);
    EXPECT_EQ(p.offloaded_layers, 8);
    EXPECT_EQ(p.offloaded_bytes, 800 * MiB);
    EXPECT_EQ(p.device_weights, 100 * MiB);
    EXPECT_EQ(find(p, "blk.0.attn").home, "nvme");
    EXPECT_EQ(find(p, "token_embd.weight").home, "device");
    EXPECT_EQ(find(p, "output.weight").home, "device");
    EXPECT_FALSE(p.embedding_output_offloaded);
}

TEST(OffloadGb, RoundsUpToWholeLayers) {
    auto in = small_model();
    const std::vector<std::pair<double, int32_t>> cases{
        {0.0, 0},  {100.0 / 1024, 1}, // exactly one 100 MiB layer
        {0.1, 2},                     // 102.4 MiB: one layer is not enough
        {0.25, 3},                    // 256 MiB -> 300 MiB
        {10.0, 8},                    // more than all layers: every layer
    };
    for (const auto &[gb, layers] : cases) {
        in.cpu_offload_gb = gb;
        const auto p = make_plan(in);
        EXPECT_EQ(p.offloaded_layers, layers) << "cpu_offload_gb " << gb;
        EXPECT_EQ(p.offloaded_bytes, static_cast<uint64_t>(layers) * 100 * MiB) << "cpu_offload_gb " << gb;
    }
    in.cpu_offload_gb = 0.25;
    EXPECT_TRUE(contains(make_plan(in).notes, "rounds up to 3 whole layers (0.29 GiB)"));
    in.cpu_offload_gb = 10.0;
    EXPECT_TRUE(contains(make_plan(in).notes, "all 8 layers offloaded"));
}

TEST(OffloadGb, AgreeingLayerCountIsAccepted) {
    auto in = small_model();
    in.cpu_offload_gb = 0.25;
    in.cpu_offload_layers = 3;
    EXPECT_EQ(make_plan(in).offloaded_layers, 3);
}

// Budget arithmetic of small_model: weights 900 MiB (100 MiB of them embedding + output), activations 10 MiB,
// overhead 64 MiB, KV 1024 tokens x 4096 B = 4 MiB, staging ring 3 x 100 MiB once anything is streamed.
// Device need with k layers offloaded (k >= 1): 1278 MiB - k x 100 MiB.
TEST(EnableCpuOffload, NothingWhenEverythingFits) {
    auto in = small_model();
    in.enable_cpu_offload = true;
    in.limit_gpu_memory = 1000 * MiB; // 978 MiB needed with nothing offloaded
    const auto p = make_plan(in);
    EXPECT_TRUE(p.fits);
    EXPECT_EQ(p.offloaded_layers, 0);
    EXPECT_EQ(p.staging_ring_bytes, 0u);
}

TEST(EnableCpuOffload, FindsTheFewestLayers) {
    auto in = small_model();
    in.limit_gpu_memory = 900 * MiB; // k = 3 needs 978 MiB, k = 4 needs 878 MiB
    in.enable_cpu_offload = true;
    const auto p = make_plan(in);
    EXPECT_TRUE(p.fits);
    EXPECT_EQ(p.offloaded_layers, 4);
    EXPECT_EQ(p.staging_ring_bytes, 300 * MiB);
    EXPECT_EQ(find(p, "blk.3.attn").home, "device");
    EXPECT_EQ(find(p, "blk.4.attn").home, "nvme");

    in.enable_cpu_offload = false;
    in.cpu_offload_layers = 3;
    EXPECT_FALSE(make_plan(in).fits);
}

TEST(EnableCpuOffload, EmbeddingAndOutputLeaveOnlyAsALastResort) {
    auto in = small_model();
    in.limit_gpu_memory = 450 * MiB; // all layers: 478 MiB; plus embedding and output: 378 MiB
    in.enable_cpu_offload = true;
    auto p = make_plan(in);
    EXPECT_TRUE(p.fits);
    EXPECT_TRUE(p.embedding_output_offloaded);
    EXPECT_EQ(p.offloaded_layers, 8);
    EXPECT_EQ(p.offloaded_bytes, 900 * MiB);
    EXPECT_EQ(p.device_weights, 0u);
    EXPECT_EQ(find(p, "token_embd.weight").home, "nvme");
    EXPECT_TRUE(contains(p.notes, "embedding and output tensors are offloaded too"));

    in.limit_gpu_memory = 300 * MiB; // not even that
    p = make_plan(in);
    EXPECT_FALSE(p.fits);
    EXPECT_FALSE(p.problems.empty());
}

TEST(Tiers, SpillInLayerOrderByCapacity) {
    auto in = small_model();
    in.tiers = {{"pinned_ram", 250 * MiB, 20e9, true}, {"nvme", 1 * GiB, 2e9, false}};
    in.cpu_offload_layers = 4;
    const auto p = make_plan(in);
    // First fit in layer order: 4.attn, 4.ffn, 5.attn, 5.ffn fill 200 MiB of pinned_ram; 6.attn (60 MiB) no longer
    // fits the 50 MiB left but 6.ffn (40 MiB) does; the rest goes to nvme.
    EXPECT_EQ(find(p, "blk.4.attn").home, "pinned_ram");
    EXPECT_EQ(find(p, "blk.5.ffn").home, "pinned_ram");
    EXPECT_EQ(find(p, "blk.6.attn").home, "nvme");
    EXPECT_EQ(find(p, "blk.6.ffn").home, "pinned_ram");
    EXPECT_EQ(find(p, "blk.7.attn").home, "nvme");
    EXPECT_EQ(find(p, "blk.7.ffn").home, "nvme");
    EXPECT_EQ(p.tier_used.at("pinned_ram"), 240 * MiB);
    EXPECT_EQ(p.tier_used.at("nvme"), 160 * MiB);
    EXPECT_TRUE(p.fits);
}

TEST(Tiers, NoRoomLeftIsAProblem) {
    auto in = small_model();
    in.tiers = {{"pinned_ram", 100 * MiB, 0, true}, {"nvme", 100 * MiB, 0, false}};
    in.cpu_offload_layers = 4;
    const auto p = make_plan(in);
    EXPECT_FALSE(p.fits);
    EXPECT_EQ(find(p, "blk.6.attn").home, "");
    EXPECT_EQ(p.tier_used.at("pinned_ram"), 100 * MiB);
    EXPECT_EQ(p.tier_used.at("nvme"), 100 * MiB);
    EXPECT_TRUE(contains(p.problems, "weights need 209715200 more bytes (200.0 MiB) than the tiers hold: add a tier "
                                     "or raise nvme.size"));
}

TEST(Tiers, NoTierAtAll) {
    auto in = small_model();
    in.tiers.clear();
    in.cpu_offload_layers = 1;
    const auto p = make_plan(in);
    EXPECT_FALSE(p.fits);
    EXPECT_TRUE(contains(p.problems, "weights need 104857600 more bytes"));
    EXPECT_TRUE(contains(p.problems, "no tier is configured"));
}

TEST(Mode, InPlaceOnlyForCpuOnAddressableTiers) {
    auto in = small_model();
    in.device_kind = "cpu";
    in.device_total = 64 * GiB;
    in.tiers = {{"numa_ram", 1 * GiB, 10e9, true}};
    in.cpu_offload_layers = 2;
    auto p = make_plan(in);
    EXPECT_EQ(find(p, "blk.7.attn").home, "numa_ram");
    EXPECT_EQ(find(p, "blk.7.attn").how, mode::in_place);
    EXPECT_EQ(find(p, "blk.5.attn").how, mode::resident);
    EXPECT_EQ(p.staging_ring_bytes, 0u); // nothing is streamed

    in.prefer_streaming = true;
    p = make_plan(in);
    EXPECT_EQ(find(p, "blk.7.attn").how, mode::streamed);
    EXPECT_EQ(p.staging_ring_bytes, 300 * MiB);

    in.prefer_streaming = false;
    in.tiers = {{"nvme", 1 * GiB, 2e9, false}};
    EXPECT_EQ(find(make_plan(in), "blk.7.attn").how, mode::streamed);

    in = small_model();
    in.tiers = {{"pinned_ram", 1 * GiB, 20e9, true}};
    in.cpu_offload_layers = 2;
    EXPECT_EQ(find(make_plan(in), "blk.7.attn").how, mode::streamed); // cuda streams even addressable tiers
}

TEST(StagingRing, DepthPlusOneTimesLargestStreamedLayer) {
    auto in = small_model();
    in.cpu_offload_layers = 2;
    in.prefetch_depth = 0;
    EXPECT_EQ(make_plan(in).staging_ring_bytes, 100 * MiB);

    in.prefetch_depth = 3;
    for (auto &t : in.tensors)
        if (t.name == "blk.7.ffn") t.bytes = 140 * MiB; // layer 7 is now 200 MiB
    EXPECT_EQ(make_plan(in).staging_ring_bytes, 800 * MiB);

    in.cpu_offload_layers = 0;
    EXPECT_EQ(make_plan(in).staging_ring_bytes, 0u);
}

// Hybrid placement's second pass: listed streamed layers wholly in addressable tiers become on_cpu, leave the
// streamed ring, and get a ring of their own only with stream_on_cpu; the device KV gets what a ring no longer takes.
TEST(StagingRing, OnCpuLayersLeaveTheStreamedRingAndGetTheirOwnOnlyWhenStreamedForLargeBatches) {
    auto in = small_model();
    in.cpu_offload_layers = 3;
    in.tiers = {{"pinned_ram", 250 * MiB, 20e9, true}, {"nvme", 100 * GiB, 2e9, false}};
    const plan first = make_plan(in);
    EXPECT_EQ(find(first, "blk.5.attn").home, "pinned_ram");
    EXPECT_EQ(find(first, "blk.6.ffn").home, "pinned_ram");
    EXPECT_EQ(find(first, "blk.7.attn").home, "nvme");
    EXPECT_EQ(first.staging_ring_bytes, 300 * MiB);
    EXPECT_EQ(first.on_cpu_ring_bytes, 0u);

    in.on_cpu_layers = {5, 6, 7}; // layer 7 is in NVMe: it keeps streaming
    in.stream_on_cpu = true;
    plan p = make_plan(in);
    EXPECT_EQ(find(p, "blk.5.attn").how, mode::on_cpu);
    EXPECT_EQ(find(p, "blk.6.ffn").how, mode::on_cpu);
    EXPECT_EQ(find(p, "blk.7.attn").how, mode::streamed);
    EXPECT_EQ(find(p, "blk.4.attn").how, mode::resident);
    EXPECT_EQ(p.staging_ring_bytes, 300 * MiB);
    EXPECT_EQ(p.on_cpu_ring_bytes, 300 * MiB);
    EXPECT_EQ(p.device_kv + 300 * MiB, first.device_kv) << "the second ring comes out of the KV cache";

    in.stream_on_cpu = false;
    p = make_plan(in);
    EXPECT_EQ(p.on_cpu_ring_bytes, 0u);
    EXPECT_EQ(p.device_kv, first.device_kv);

    in.on_cpu_layers = {6, 7};
    in.cpu_offload_layers = 2;
    in.tiers = {{"pinned_ram", 250 * MiB, 20e9, true}};
    p = make_plan(in);
    EXPECT_EQ(p.staging_ring_bytes, 0u) << "every streamed layer is on the CPU";
    EXPECT_EQ(p.device_kv, make_plan([&] { auto i = in; i.on_cpu_layers.clear(); return i; }()).device_kv + 300 * MiB);
}

TEST(Placements, FollowInputOrderAndCoverEveryTensor) {
    auto in = small_model();
    in.cpu_offload_layers = 3;
    const auto p = make_plan(in);
    ASSERT_EQ(p.placements.size(), in.tensors.size());
    uint64_t total = 0;
    for (size_t i = 0; i < in.tensors.size(); ++i) {
        EXPECT_EQ(p.placements[i].tensor, in.tensors[i].name);
        EXPECT_EQ(p.placements[i].bytes, in.tensors[i].bytes);
        total += p.placements[i].bytes;
    }
    EXPECT_EQ(total, p.device_weights + p.offloaded_bytes);
}

TEST(ModeNames, AreStable) {
    EXPECT_EQ(to_string(mode::resident), "resident");
    EXPECT_EQ(to_string(mode::streamed), "streamed");
    EXPECT_EQ(to_string(mode::in_place), "in_place");
}
