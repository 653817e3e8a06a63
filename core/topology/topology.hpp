// What this machine has: packages, cores, NUMA nodes with their memory and CPUs, caches, GPUs on PCI, RAM, and the
// SIMD extensions kernels may use. Discovered once at start-up (hwloc) for thread pinning and the memory planner.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace strata::topology {

struct cache_info {
    int level = 0;           // 1 = L1 (data/unified), 2 = L2, ...
    uint64_t size_bytes = 0; // of one cache
    int count = 0;           // caches of this level and size
};

struct numa_node {
    int os_index = 0;
    uint64_t memory_bytes = 0;
    std::vector<int> cpus; // OS ids of its PUs
};

struct pci_gpu {
    std::string vendor; // "NVIDIA Corporation", or "0x10de" when the PCI name database is not available
    std::string name;   // device name, or "device 0x2335"
    std::string bus_id; // "0000:17:00.0"
    int numa_node = -1; // OS index of the nearest NUMA node, -1 when unknown
    uint16_t vendor_id = 0, device_id = 0;
};

// Where one PCI device hangs off the CPU side: the NUMA nodes of its nearest non-I/O ancestor (a package, a group,
// or the whole machine when the firmware says nothing more precise).
struct pci_locality {
    unsigned domain = 0, bus = 0, dev = 0, func = 0;
    std::vector<int> numa_nodes; // OS indexes; empty when hwloc gives the ancestor no nodes
};

struct machine {
    int packages = 0;
    int cores = 0;
    int pus = 0;
    std::vector<numa_node> numa;
    std::vector<cache_info> caches;
    std::vector<pci_gpu> gpus;
    std::vector<pci_locality> pci_devices; // every PCI device hwloc keeps (GPUs, NICs, storage), for nearest_numa_nodes
    uint64_t total_ram = 0;
    uint64_t available_ram = 0; // /proc/meminfo MemAvailable, capped by a cgroup v2 memory limit when there is one
    std::vector<int> one_pu_per_core; // OS ids, one per physical core, for pinning
    std::string cpu_model;
    bool avx2 = false, fma = false, f16c = false, avx512f = false;
};

// Throws strata::error when hwloc cannot load the topology.
machine discover();

// The same description of a topology exported by hwloc as XML (lstopo foo.xml): for tests and for looking at another
// machine. Memory figures come from the XML only; the SIMD flags stay false.
machine discover_from_xml(const std::string &xml);

// "0000:17:00.0" (also an 8-digit domain as nvidia-smi writes it, or no domain: "17:00.0"; hex in either case) as
// {domain, bus, dev, func}; nullopt when it is not a PCI bus id.
std::optional<pci_locality> parse_pci_bus_id(std::string_view bus_id);

// The OS indexes of the NUMA nodes nearest the PCI device at bus_id; empty ("unknown") when the id does not parse or
// the device is not in the topology (virtual machines often show no PCI at all).
std::vector<int> nearest_numa_nodes(const machine &m, std::string_view bus_id);

// Readable table with the headings "CPU", "Memory", "NUMA nodes", "Caches", "GPUs".
std::string to_text(const machine &m);

// {packages, cores, pus, cpu_model, isa{avx2,fma,f16c,avx512f}, total_ram, available_ram, one_pu_per_core,
//  numa[{os_index, memory_bytes, cpus}], caches[{level, size_bytes, count}],
//  gpus[{vendor, name, bus_id, numa_node, vendor_id, device_id}]}
nlohmann::json to_json(const machine &m);

} // namespace strata::topology
