#include "topology/topology.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
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

// ---- PCI locality: which NUMA node a GPU is nearest -------------------------------------------------------------

namespace {

// Two packages with one NUMA node each; a GPU under the second package's host bridge (0000:41:00.0) and a BMC's
// display adapter under a host bridge of the whole machine (0000:00:02.0), as on a two-socket server.
const char *const two_socket_xml = R"(<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE topology SYSTEM "hwloc2.dtd">
<topology version="2.0">
  <object type="Machine" os_index="0" cpuset="0x0000000f" complete_cpuset="0x0000000f" allowed_cpuset="0x0000000f" nodeset="0x00000003" complete_nodeset="0x00000003" allowed_nodeset="0x00000003" gp_index="1">
    <object type="Package" os_index="0" cpuset="0x00000003" complete_cpuset="0x00000003" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="2">
      <object type="NUMANode" os_index="0" cpuset="0x00000003" complete_cpuset="0x00000003" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="3" local_memory="1073741824"/>
      <object type="Core" os_index="0" cpuset="0x00000001" complete_cpuset="0x00000001" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="4">
        <object type="PU" os_index="0" cpuset="0x00000001" complete_cpuset="0x00000001" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="5"/>
      </object>
      <object type="Core" os_index="1" cpuset="0x00000002" complete_cpuset="0x00000002" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="6">
        <object type="PU" os_index="1" cpuset="0x00000002" complete_cpuset="0x00000002" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="7"/>
      </object>
    </object>
    <object type="Package" os_index="1" cpuset="0x0000000c" complete_cpuset="0x0000000c" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="8">
      <object type="NUMANode" os_index="1" cpuset="0x0000000c" complete_cpuset="0x0000000c" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="9" local_memory="1073741824"/>
      <object type="Core" os_index="2" cpuset="0x00000004" complete_cpuset="0x00000004" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="10">
        <object type="PU" os_index="2" cpuset="0x00000004" complete_cpuset="0x00000004" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="11"/>
      </object>
      <object type="Core" os_index="3" cpuset="0x00000008" complete_cpuset="0x00000008" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="12">
        <object type="PU" os_index="3" cpuset="0x00000008" complete_cpuset="0x00000008" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="13"/>
      </object>
      <object type="Bridge" gp_index="14" bridge_type="0-1" depth="0" bridge_pci="0000:[41-41]">
        <object type="PCIDev" gp_index="15" pci_busid="0000:41:00.0" pci_type="0302 [10de:2335] [10de:18be] a1" pci_link_speed="0.000000">
          <info name="PCIVendor" value="NVIDIA Corporation"/>
          <info name="PCIDevice" value="GH100 [H200 SXM 141GB]"/>
        </object>
      </object>
    </object>
    <object type="Bridge" gp_index="16" bridge_type="0-1" depth="0" bridge_pci="0000:[00-00]">
      <object type="PCIDev" gp_index="17" pci_busid="0000:00:02.0" pci_type="0300 [1a03:2000] [1a03:2000] 41" pci_link_speed="0.000000"/>
    </object>
  </object>
</topology>
)";

const machine &two_socket() {
    static const machine m = discover_from_xml(two_socket_xml);
    return m;
}

} // namespace

TEST(PciLocality, TheXmlMachineHasTwoNodesAndTwoDisplayDevices) {
    const machine &m = two_socket();
    ASSERT_EQ(m.numa.size(), 2U);
    EXPECT_EQ(m.numa[1].os_index, 1);
    EXPECT_EQ(m.numa[1].cpus, (std::vector<int>{2, 3}));
    ASSERT_EQ(m.gpus.size(), 2U);
    EXPECT_EQ(m.pci_devices.size(), 2U);
}

TEST(PciLocality, AGpuUnderTheSecondPackageIsNearestNodeOne) {
    const machine &m = two_socket();
    EXPECT_EQ(nearest_numa_nodes(m, "0000:41:00.0"), (std::vector<int>{1}));
    // As CUDA and nvidia-smi write it: upper-case hex, an 8-digit domain, or no domain.
    EXPECT_EQ(nearest_numa_nodes(m, "0000:41:00.0"), nearest_numa_nodes(m, "00000000:41:00.0"));
    EXPECT_EQ(nearest_numa_nodes(m, "41:00.0"), (std::vector<int>{1}));
    const auto gpu = std::find_if(m.gpus.begin(), m.gpus.end(), [](const pci_gpu &g) { return g.bus_id == "0000:41:00.0"; });
    ASSERT_NE(gpu, m.gpus.end());
    EXPECT_EQ(gpu->numa_node, 1);
}

TEST(PciLocality, ADeviceOfTheWholeMachineIsNearEveryNode) {
    EXPECT_EQ(nearest_numa_nodes(two_socket(), "0000:00:02.0"), (std::vector<int>{0, 1}));
}

TEST(PciLocality, AnUnknownOrMalformedBusIdIsUnknown) {
    const machine &m = two_socket();
    EXPECT_TRUE(nearest_numa_nodes(m, "0000:42:00.0").empty());
    EXPECT_TRUE(nearest_numa_nodes(m, "0001:41:00.0").empty()) << "another PCI domain";
    for (const char *bad : {"", "gpu0", "0000:41:00", "0000:41:00.0x", "0000:41:00.0 ", "-0:41:00.0", "0000:41:20.0",
                            "0000:41:00.8", "0x0:41:00.0"})
        EXPECT_TRUE(nearest_numa_nodes(m, bad).empty()) << '"' << bad << '"';
    EXPECT_TRUE(nearest_numa_nodes(machine{}, "0000:41:00.0").empty()) << "a machine without PCI information";
}

TEST(PciLocality, BusIdsParseAsHwlocReadsThem) {
    const auto id = parse_pci_bus_id("0000:3B:1f.7");
    ASSERT_TRUE(id.has_value());
    EXPECT_EQ(id->domain, 0U);
    EXPECT_EQ(id->bus, 0x3bU);
    EXPECT_EQ(id->dev, 0x1fU);
    EXPECT_EQ(id->func, 7U);
    const auto short_id = parse_pci_bus_id("3b:00.1");
    ASSERT_TRUE(short_id.has_value());
    EXPECT_EQ(short_id->bus, 0x3bU);
    EXPECT_EQ(short_id->func, 1U);
}

TEST(PciLocality, ThisMachineKnowsItsOwnGpusLocality) {
    // Whatever this machine has: each GPU found at discovery is found again by its bus id.
    const machine &m = this_machine();
    for (const pci_gpu &g : m.gpus) {
        const std::vector<int> nodes = nearest_numa_nodes(m, g.bus_id);
        if (g.numa_node >= 0) {
            EXPECT_EQ(nodes, (std::vector<int>{g.numa_node})) << g.bus_id;
        }
    }
    std::printf("this machine: %zu GPU(s), %zu PCI device(s) with locality\n", m.gpus.size(), m.pci_devices.size());
}

TEST(PciLocality, ABrokenXmlIsAClearError) {
    try {
        (void)discover_from_xml("<topology>");
        FAIL() << "no error";
    } catch (const std::exception &e) {
        EXPECT_NE(std::string(e.what()).find("topology XML"), std::string::npos) << e.what();
    }
}
