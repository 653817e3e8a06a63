#include "topology/topology.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

using namespace strata::topology;

namespace {
const machine &this_machine() {
    static const machine m = discover();
    return m;
}
} // namespace

TEST(Topology, CountsAreConsistent) {
    const machine &m = this_machine();
    EXPECT_GE(m.packages, 1);
    EXPECT_GE(m.cores, 1);
    EXPECT_GE(m.pus, m.cores);
    ASSERT_EQ(m.one_pu_per_core.size(), static_cast<size_t>(m.cores));
    // One PU per core means no two entries share an id.
    const std::set<int> distinct(m.one_pu_per_core.begin(), m.one_pu_per_core.end());
    EXPECT_EQ(distinct.size(), m.one_pu_per_core.size());
    for (const int pu : m.one_pu_per_core) EXPECT_GE(pu, 0);
}

TEST(Topology, NumaMemorySumsToTotalRam) {
    const machine &m = this_machine();
    ASSERT_GE(m.numa.size(), 1U);
    uint64_t sum = 0;
    size_t cpus = 0;
    for (const numa_node &n : m.numa) {
        sum += n.memory_bytes;
        cpus += n.cpus.size();
    }
    EXPECT_GT(m.total_ram, 0U);
    // Within 5%: hwloc's total is the sum of the nodes, the fallback comes from /proc/meminfo.
    EXPECT_NEAR(static_cast<double>(sum), static_cast<double>(m.total_ram), 0.05 * static_cast<double>(m.total_ram));
    EXPECT_GE(cpus, 1U);
    EXPECT_LE(m.available_ram, m.total_ram);
    EXPECT_GT(m.available_ram, 0U);
}

TEST(Topology, PinningCpusBelongToNumaNodes) {
    const machine &m = this_machine();
    std::set<int> numa_cpus;
    for (const numa_node &n : m.numa) numa_cpus.insert(n.cpus.begin(), n.cpus.end());
    for (const int pu : m.one_pu_per_core) EXPECT_TRUE(numa_cpus.count(pu) == 1) << "PU " << pu;
}

TEST(Topology, GpusAreDisplayDevicesWithBusIds) {
    for (const pci_gpu &g : this_machine().gpus) {
        EXPECT_EQ(g.bus_id.size(), 12U) << g.bus_id; // "0000:17:00.0"
        EXPECT_FALSE(g.vendor.empty());
        EXPECT_FALSE(g.name.empty());
    }
}

TEST(Topology, JsonHasTheDocumentedFields) {
    const machine &m = this_machine();
    const nlohmann::json j = to_json(m);
    for (const char *field : {"packages", "cores", "pus", "cpu_model", "isa", "total_ram", "available_ram",
                              "one_pu_per_core", "numa", "caches", "gpus"})
        EXPECT_TRUE(j.contains(field)) << field;
    EXPECT_EQ(j["cores"].get<int>(), m.cores);
    EXPECT_EQ(j["total_ram"].get<uint64_t>(), m.total_ram);
    ASSERT_EQ(j["numa"].size(), m.numa.size());
    EXPECT_TRUE(j["numa"][0].contains("memory_bytes"));
    EXPECT_TRUE(j["numa"][0].contains("cpus"));
    EXPECT_TRUE(j["isa"].contains("avx2"));
    EXPECT_EQ(j["gpus"].size(), m.gpus.size());
}

TEST(Topology, JsonAndTextDescribeAHandMadeMachine) {
    machine m;
    m.packages = 2;
    m.cores = 4;
    m.pus = 8;
    m.numa = {{0, 1ULL << 30, {0, 1, 2, 3}}, {1, 1ULL << 30, {4, 5, 6, 7}}};
    m.caches = {{2, 1ULL << 20, 4}};
    m.gpus = {{"NVIDIA", "H200", "0000:17:00.0", 1, 0x10de, 0x2335}};
    m.total_ram = 2ULL << 30;
    m.available_ram = 1ULL << 30;
    m.one_pu_per_core = {0, 2, 4, 6};
    m.cpu_model = "Test CPU";
    m.avx2 = true;
    const nlohmann::json j = to_json(m);
    EXPECT_EQ(j["gpus"][0]["bus_id"], "0000:17:00.0");
    EXPECT_EQ(j["gpus"][0]["vendor_id"], 0x10de);
    EXPECT_EQ(j["numa"][1]["cpus"], nlohmann::json({4, 5, 6, 7}));
    EXPECT_EQ(j["caches"][0]["size_bytes"], 1ULL << 20);
    EXPECT_EQ(j["isa"]["avx2"], true);
    EXPECT_EQ(j["isa"]["avx512f"], false);

    const std::string text = to_text(m);
    for (const char *heading : {"CPU\n", "Memory\n", "NUMA nodes\n", "Caches\n", "GPUs\n"})
        EXPECT_NE(text.find(heading), std::string::npos) << heading;
    EXPECT_NE(text.find("CPUs 4-7"), std::string::npos) << text;
    EXPECT_NE(text.find("H200"), std::string::npos);
    EXPECT_NE(text.find("4 x 1 MiB"), std::string::npos) << text;
}

TEST(Topology, TextOfThisMachineHasTheHeadings) {
    const std::string text = to_text(this_machine());
    for (const char *heading : {"CPU\n", "Memory\n", "NUMA nodes\n", "Caches\n", "GPUs\n"})
        EXPECT_NE(text.find(heading), std::string::npos) << heading;
}
