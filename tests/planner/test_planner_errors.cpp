// Invalid knobs and budgets above what the machine has are errors naming the key; the plan is never made.
#include "common/error.hpp"
#include "planner/memory_planner.hpp"
#include "planner_test_model.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace strata::planner;
using namespace strata::planner::test;

namespace {

// The strata::error message make_plan throws, or "" when it does not throw.
std::string error_of(const inputs &in) {
    try {
        (void)make_plan(in);
    } catch (const strata::error &e) {
        return e.what();
    }
    return "";
}

#define EXPECT_PLAN_ERROR(in, part)                                                                                    \
    do {                                                                                                               \
        const std::string message = error_of(in);                                                                      \
        EXPECT_NE(message.find(part), std::string::npos)                                                               \
            << "expected an error containing '" << (part) << "', got '" << message << "'";                             \
    } while (0)

inputs cpu_model() {
    auto in = small_model();
    in.device_kind = "cpu";
    in.device_total = 16 * GiB;
    return in;
}

} // namespace

TEST(PhysicalLimits, DeviceMemoryAboveRam) {
    auto in = cpu_model();
    in.physical_ram = 25125558682; // 23.4 GiB
    in.device_memory = 64 * GiB;
    EXPECT_PLAN_ERROR(in, "device_memory 64.0 GiB exceeds the machine's 23.4 GiB of RAM");
    in.device_memory = 20 * GiB;
    EXPECT_EQ(error_of(in), "");
}

// Each tier reports its own limit (capacity_limit); the planner checks sizes against it without knowing any tier.
TEST(PhysicalLimits, TierSizeAboveTheTiersOwnLimit) {
    auto in = small_model();
    in.tiers = {{"pinned_ram", 8 * GiB, 0, true}};
    in.tiers[0].limit = 64 * MiB;
    in.tiers[0].limit_reason = "the locked-memory limit RLIMIT_MEMLOCK";
    EXPECT_PLAN_ERROR(in, "pinned_ram.size 8.0 GiB exceeds what the pinned_ram tier can hold here: 64.0 MiB, set by "
                          "the locked-memory limit RLIMIT_MEMLOCK; lower pinned_ram.size");
    in.tiers[0].limit = 0; // unknown: not checked
    EXPECT_EQ(error_of(in), "");
    in.tiers = {{"numa_ram", 40 * GiB, 0, true}};
    in.tiers[0].limit = 32 * GiB;
    in.tiers[0].limit_reason = "the memory of NUMA node(s) 0";
    EXPECT_PLAN_ERROR(in, "numa_ram.size 40.0 GiB exceeds what the numa_ram tier can hold here: 32.0 GiB");
    in.tiers[0].capacity = 20 * GiB;
    EXPECT_EQ(error_of(in), "");
    in.tiers = {{"nvme", 4096 * GiB, 0, false}}; // disks are not bounded by RAM
    in.tiers[0].limit = 500 * GiB;
    EXPECT_PLAN_ERROR(in, "nvme.size 4096.0 GiB exceeds what the nvme tier can hold here: 500.0 GiB");
}

TEST(PhysicalLimits, LimitGpuMemoryAboveDevice) {
    auto in = small_model();
    in.limit_gpu_memory = 100 * GiB;
    EXPECT_PLAN_ERROR(in, "limit_gpu_memory 100.0 GiB exceeds the 80.0 GiB");
}

TEST(InvalidKnobs, CpuOffloadLayersOutOfRange) {
    auto in = small_model();
    in.cpu_offload_layers = 9;
    EXPECT_PLAN_ERROR(in, "cpu_offload_layers 9 must be between 0 and the model's 8 layers");
    in.cpu_offload_layers = -1;
    EXPECT_PLAN_ERROR(in, "cpu_offload_layers -1");
}

TEST(InvalidKnobs, GpuMemoryUtilizationOutsideZeroOne) {
    auto in = small_model();
    for (double bad : {0.0, -0.5, 1.5, std::nan("")}) {
        in.gpu_memory_utilization = bad;
        EXPECT_PLAN_ERROR(in, "gpu_memory_utilization");
    }
    in.gpu_memory_utilization = 1.0;
    EXPECT_EQ(error_of(in), "");
}

TEST(InvalidKnobs, CpuOffloadGb) {
    auto in = small_model();
    in.cpu_offload_gb = -1.0;
    EXPECT_PLAN_ERROR(in, "cpu_offload_gb -1 must be a non-negative");
    in.cpu_offload_gb = std::numeric_limits<double>::infinity();
    EXPECT_PLAN_ERROR(in, "cpu_offload_gb");
}

TEST(InvalidKnobs, OffloadGbAndLayersDisagree) {
    auto in = small_model();
    in.cpu_offload_gb = 0.25; // 3 layers
    in.cpu_offload_layers = 2;
    EXPECT_PLAN_ERROR(in, "cpu_offload_gb 0.25 offloads 3 layers but cpu_offload_layers is 2: set only one of them");
}

TEST(InvalidKnobs, CountsAndSizes) {
    auto in = small_model();
    in.max_num_seqs = 0;
    EXPECT_PLAN_ERROR(in, "max_num_seqs 0");
    in = small_model();
    in.max_model_len = -1;
    EXPECT_PLAN_ERROR(in, "max_model_len -1");
    in = small_model();
    in.max_model_len = 0;
    in.model_context_length = 0;
    EXPECT_PLAN_ERROR(in, "--max-model-len");
    in = small_model();
    in.prefetch_depth = -1;
    EXPECT_PLAN_ERROR(in, "prefetch_depth -1");
    in = small_model();
    in.limit_gpu_memory = 0;
    EXPECT_PLAN_ERROR(in, "limit_gpu_memory is 0");
    in = cpu_model();
    in.device_memory = 0;
    EXPECT_PLAN_ERROR(in, "device_memory is 0");
}

TEST(InvalidInputs, ModelAndTiers) {
    auto in = small_model();
    in.tensors.push_back({"blk.99.attn", 99, MiB});
    EXPECT_PLAN_ERROR(in, "tensor 'blk.99.attn' has layer 99");
    in = small_model();
    in.tensors.clear();
    EXPECT_PLAN_ERROR(in, "no weight tensors");
    in = small_model();
    in.n_head_kv = 0;
    EXPECT_PLAN_ERROR(in, "n_head_kv");
    in = small_model();
    in.tiers.push_back(in.tiers[0]);
    EXPECT_PLAN_ERROR(in, "tier 'nvme' is configured twice");
    in = small_model();
    in.device_kind.clear();
    EXPECT_PLAN_ERROR(in, "device kind");
    in = small_model();
    in.device_total = 0;
    EXPECT_PLAN_ERROR(in, "reports no memory");
}

TEST(InvalidInputs, KvBytesPerToken) {
    EXPECT_THROW(kv_bytes_per_token(0, 8, 128, STRATA_KV_F16), strata::error);
    EXPECT_THROW(kv_bytes_per_token(32, 8, 128, 7777), strata::error);
    constexpr int32_t big = std::numeric_limits<int32_t>::max();
    EXPECT_THROW(kv_bytes_per_token(big, big, big, STRATA_KV_F32), strata::error);
    EXPECT_THROW(kv_bytes_per_token(big, big, 64, STRATA_KV_Q8_0), strata::error);
    // q8_0 keeps heads in groups of 32 values: a head of 8 cannot be cut into them.
    try {
        (void)kv_bytes_per_token(5, 8, 8, STRATA_KV_Q8_0);
        ADD_FAILURE() << "a q8_0 cache of 8-value heads was sized";
    } catch (const strata::error &e) {
        EXPECT_NE(std::string(e.what()).find("groups of 32 values, but this model's heads have 8"), std::string::npos)
            << e.what();
    }
}
