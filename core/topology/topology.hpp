// What this machine has: packages, cores, NUMA nodes with their memory and CPUs, caches, GPUs on PCI, RAM, and the
// SIMD extensions kernels may use. Discovered once at start-up (hwloc) for thread pinning and the memory planner.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
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

struct machine {
    int packages = 0;
    int cores = 0;
    int pus = 0;
    std::vector<numa_node> numa;
    std::vector<cache_info> caches;
    std::vector<pci_gpu> gpus;
    uint64_t total_ram = 0;
    uint64_t available_ram = 0; // /proc/meminfo MemAvailable, capped by a cgroup v2 memory limit when there is one
    std::vector<int> one_pu_per_core; // OS ids, one per physical core, for pinning
    std::string cpu_model;
    bool avx2 = false, fma = false, f16c = false, avx512f = false;
};

// Throws strata::error when hwloc cannot load the topology.
machine discover();

// Readable table with the headings "CPU", "Memory", "NUMA nodes", "Caches", "GPUs".
std::string to_text(const machine &m);

// {packages, cores, pus, cpu_model, isa{avx2,fma,f16c,avx512f}, total_ram, available_ram, one_pu_per_core,
//  numa[{os_index, memory_bytes, cpus}], caches[{level, size_bytes, count}],
//  gpus[{vendor, name, bus_id, numa_node, vendor_id, device_id}]}
nlohmann::json to_json(const machine &m);

} // namespace strata::topology
