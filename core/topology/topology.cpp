#include "topology/topology.hpp"

#include "common/error.hpp"

#include <fmt/format.h>
#include <hwloc.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace strata::topology {

namespace {

struct topology_deleter {
    void operator()(hwloc_topology *t) const { hwloc_topology_destroy(t); }
};
using topology_ptr = std::unique_ptr<hwloc_topology, topology_deleter>;

// This machine's topology, or the one an hwloc XML export describes when xml is given.
topology_ptr load_topology(const std::string *xml = nullptr) {
    hwloc_topology_t raw = nullptr;
    if (hwloc_topology_init(&raw) != 0) fail("hwloc could not initialise a topology");
    topology_ptr topo(raw);
    // PCI devices are filtered out by default; keep the important ones (GPUs among them). Their locality is what
    // puts pinned staging memory next to a GPU; the cost is a walk of /sys/bus/pci at start-up.
    hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    // hwloc's optional plugins (Debian's libhwloc-plugins, which OpenMPI depends on) are left out, so discovery is
    // the same with or without them: the built-in Linux backend reads PCI devices from sysfs, which the `pci` plugin
    // (libpciaccess) would repeat, leaking its state at exit (LeakSanitizer reports it in every process); `opencl` and
    // `gl` start GPU runtimes for OS devices Strata does not use (its CUDA plugin enumerates GPUs itself).
    for (const char *plugin : {"pci", "opencl", "gl"})
        hwloc_topology_set_components(raw, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, plugin);
    if (xml != nullptr) {
        if (hwloc_topology_set_xmlbuffer(raw, xml->c_str(), static_cast<int>(xml->size() + 1)) != 0 ||
            hwloc_topology_load(raw) != 0)
            fail("hwloc could not read the topology XML ({} bytes)", xml->size());
        return topo;
    }
    if (hwloc_topology_load(raw) != 0)
        fail("hwloc could not read this machine's topology; check that /sys and /proc are mounted");
    return topo;
}

std::vector<int> os_ids(hwloc_const_bitmap_t set) {
    std::vector<int> out;
    if (set == nullptr) return out;
    for (int i = hwloc_bitmap_first(set); i >= 0; i = hwloc_bitmap_next(set, i)) out.push_back(i);
    return out;
}

// A value in kB from /proc/meminfo, in bytes; 0 when missing.
uint64_t meminfo_bytes(std::string_view field) {
    std::ifstream in("/proc/meminfo");
    std::string name;
    uint64_t kb = 0;
    std::string unit;
    while (in >> name >> kb) {
        std::getline(in, unit);
        if (name.size() == field.size() + 1 && name.compare(0, field.size(), field) == 0) return kb * 1024;
    }
    return 0;
}

// A cgroup v2 file holding a byte count or "max"; 0 when absent or unlimited.
uint64_t cgroup_bytes(const char *path) {
    std::ifstream in(path);
    std::string text;
    if (!(in >> text) || text == "max") return 0;
    try {
        return std::stoull(text);
    } catch (...) {
        return 0;
    }
}

std::string cpu_model_from_proc() {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("model name", 0) == 0) {
            const size_t colon = line.find(':');
            if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
        }
    return "";
}

void detect_isa(machine &m) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    m.avx2 = __builtin_cpu_supports("avx2");
    m.fma = __builtin_cpu_supports("fma");
    m.avx512f = __builtin_cpu_supports("avx512f");
    // F16C has no __builtin_cpu_supports name in every compiler: CPUID leaf 1, ECX bit 29, usable only with AVX.
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (__get_cpuid(1, &eax, &ebx, &ecx, &edx)) m.f16c = ((ecx >> 29) & 1U) != 0 && __builtin_cpu_supports("avx");
#else
    (void)m;
#endif
}

std::string pci_vendor_fallback(uint16_t id) {
    switch (id) {
    case 0x10de: return "NVIDIA";
    case 0x1002: return "AMD";
    case 0x8086: return "Intel";
    case 0x1a03: return "ASPEED";
    case 0x102b: return "Matrox";
    default: return fmt::format("0x{:04x}", id);
    }
}

void collect_gpus(hwloc_topology_t topo, machine &m) {
    for (hwloc_obj_t obj = hwloc_get_next_pcidev(topo, nullptr); obj != nullptr; obj = hwloc_get_next_pcidev(topo, obj)) {
        const auto &pci = obj->attr->pcidev;
        if ((pci.class_id >> 8) != 0x03) continue; // PCI base class 0x03: display controllers
        pci_gpu g;
        g.vendor_id = pci.vendor_id;
        g.device_id = pci.device_id;
        g.bus_id = fmt::format("{:04x}:{:02x}:{:02x}.{:x}", pci.domain, pci.bus, pci.dev, pci.func);
        const char *vendor = hwloc_obj_get_info_by_name(obj, "PCIVendor");
        const char *device = hwloc_obj_get_info_by_name(obj, "PCIDevice");
        g.vendor = vendor != nullptr ? vendor : pci_vendor_fallback(pci.vendor_id);
        g.name = device != nullptr ? device : fmt::format("device 0x{:04x}", pci.device_id);
        const hwloc_obj_t anchor = hwloc_get_non_io_ancestor_obj(topo, obj);
        // Near one node only when its CPU-side ancestor covers exactly one.
        if (anchor != nullptr && anchor->nodeset != nullptr && hwloc_bitmap_weight(anchor->nodeset) == 1)
            g.numa_node = hwloc_bitmap_first(anchor->nodeset);
        m.gpus.push_back(std::move(g));
    }
}

void collect_pci_localities(hwloc_topology_t topo, machine &m) {
    for (hwloc_obj_t obj = hwloc_get_next_pcidev(topo, nullptr); obj != nullptr; obj = hwloc_get_next_pcidev(topo, obj)) {
        const auto &pci = obj->attr->pcidev;
        pci_locality l;
        l.domain = pci.domain;
        l.bus = pci.bus;
        l.dev = pci.dev;
        l.func = pci.func;
        const hwloc_obj_t anchor = hwloc_get_non_io_ancestor_obj(topo, obj);
        if (anchor != nullptr) l.numa_nodes = os_ids(anchor->nodeset);
        m.pci_devices.push_back(std::move(l));
    }
}

void collect_caches(hwloc_topology_t topo, machine &m) {
    static constexpr hwloc_obj_type_t levels[] = {HWLOC_OBJ_L1CACHE, HWLOC_OBJ_L2CACHE, HWLOC_OBJ_L3CACHE,
                                                  HWLOC_OBJ_L4CACHE, HWLOC_OBJ_L5CACHE};
    for (const hwloc_obj_type_t type : levels) {
        const int n = hwloc_get_nbobjs_by_type(topo, type);
        for (int i = 0; i < n; ++i) {
            const hwloc_obj_t obj = hwloc_get_obj_by_type(topo, type, static_cast<unsigned>(i));
            const int level = static_cast<int>(obj->attr->cache.depth);
            const uint64_t size = obj->attr->cache.size;
            // Hybrid CPUs have caches of one level in different sizes: one row per (level, size).
            auto it = std::find_if(m.caches.begin(), m.caches.end(),
                                   [&](const cache_info &c) { return c.level == level && c.size_bytes == size; });
            if (it == m.caches.end()) m.caches.push_back({level, size, 1});
            else ++it->count;
        }
    }
}

// `local`: the topology is this machine's, so /proc, the cgroup and CPUID may add to what hwloc says.
machine describe(hwloc_topology_t topo, bool local) {
    machine m;

    m.packages = std::max(1, hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE));
    m.pus = std::max(1, hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU));
    const int n_cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
    // Some virtual machines report no cores; each PU then stands for one.
    const hwloc_obj_type_t core_type = n_cores > 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
    m.cores = n_cores > 0 ? n_cores : m.pus;
    for (int i = 0; i < m.cores; ++i) {
        const hwloc_obj_t core = hwloc_get_obj_by_type(topo, core_type, static_cast<unsigned>(i));
        const int first = core != nullptr ? hwloc_bitmap_first(core->cpuset) : -1;
        m.one_pu_per_core.push_back(first >= 0 ? first : i);
    }

    const int n_numa = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
    for (int i = 0; i < n_numa; ++i) {
        const hwloc_obj_t node = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(i));
        m.numa.push_back({static_cast<int>(node->os_index), node->attr->numanode.local_memory, os_ids(node->cpuset)});
    }

    // Some VMs and sandboxes report less memory per NUMA node than the kernel gives the process; the kernel's
    // MemTotal is what allocations can actually use, so the larger figure wins (and a single node gets all of it).
    m.total_ram = std::max<uint64_t>(hwloc_get_root_obj(topo)->total_memory, local ? meminfo_bytes("MemTotal") : 0);
    if (m.numa.size() == 1) m.numa[0].memory_bytes = std::max(m.numa[0].memory_bytes, m.total_ram);
    if (m.numa.empty()) {
        numa_node whole{0, m.total_ram, os_ids(hwloc_get_root_obj(topo)->cpuset)};
        m.numa.push_back(std::move(whole));
    } else if (m.numa.size() == 1 && m.numa[0].memory_bytes == 0) {
        m.numa[0].memory_bytes = m.total_ram;
    }

    if (local) {
        m.available_ram = meminfo_bytes("MemAvailable");
        if (m.available_ram == 0) m.available_ram = meminfo_bytes("MemFree");
        // In a container the cgroup limit, not the host's free memory, is what this process can use.
        if (const uint64_t limit = cgroup_bytes("/sys/fs/cgroup/memory.max"); limit > 0) {
            const uint64_t used = cgroup_bytes("/sys/fs/cgroup/memory.current");
            m.available_ram = std::min(m.available_ram, limit > used ? limit - used : 0);
        }
        m.available_ram = std::min(m.available_ram, m.total_ram);
    } else {
        m.available_ram = m.total_ram;
    }

    collect_caches(topo, m);
    collect_gpus(topo, m);
    collect_pci_localities(topo, m);

    const hwloc_obj_t package = hwloc_get_obj_by_type(topo, HWLOC_OBJ_PACKAGE, 0);
    const char *model = package != nullptr ? hwloc_obj_get_info_by_name(package, "CPUModel") : nullptr;
    m.cpu_model = model != nullptr ? model : local ? cpu_model_from_proc() : std::string();
    if (local) detect_isa(m);
    return m;
}

} // namespace

machine discover() {
    const topology_ptr topo = load_topology();
    return describe(topo.get(), true);
}

machine discover_from_xml(const std::string &xml) {
    const topology_ptr topo = load_topology(&xml);
    return describe(topo.get(), false);
}

std::optional<pci_locality> parse_pci_bus_id(std::string_view bus_id) {
    const std::string text(bus_id);
    pci_locality id;
    int consumed = -1;
    // Domain first: "%x:%x.%x" would also match the first part of a full id and stop there.
    if (std::sscanf(text.c_str(), "%x:%x:%x.%x%n", &id.domain, &id.bus, &id.dev, &id.func, &consumed) != 4 ||
        static_cast<size_t>(consumed) != text.size()) {
        id.domain = 0;
        consumed = -1;
        if (std::sscanf(text.c_str(), "%x:%x.%x%n", &id.bus, &id.dev, &id.func, &consumed) != 3 ||
            static_cast<size_t>(consumed) != text.size())
            return std::nullopt;
    }
    // sscanf's %x also takes a sign and a 0x prefix; a bus id has neither.
    if (text.find_first_not_of("0123456789abcdefABCDEF:.") != std::string::npos) return std::nullopt;
    if (id.bus > 0xff || id.dev > 0x1f || id.func > 0x7) return std::nullopt;
    return id;
}

std::vector<int> nearest_numa_nodes(const machine &m, std::string_view bus_id) {
    const std::optional<pci_locality> id = parse_pci_bus_id(bus_id);
    if (!id) return {};
    for (const pci_locality &d : m.pci_devices)
        if (d.domain == id->domain && d.bus == id->bus && d.dev == id->dev && d.func == id->func) return d.numa_nodes;
    return {};
}

namespace {

std::string gib(uint64_t bytes) { return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / (1024.0 * 1024 * 1024)); }

std::string size_text(uint64_t bytes) {
    if (bytes >= (1ULL << 20) && bytes % (1ULL << 20) == 0) return fmt::format("{} MiB", bytes >> 20);
    if (bytes >= (1ULL << 10) && bytes % (1ULL << 10) == 0) return fmt::format("{} KiB", bytes >> 10);
    return fmt::format("{} B", bytes);
}

// "0-3,8,10-11": compact enough to print a 200-CPU node on one line.
std::string cpu_list(const std::vector<int> &cpus) {
    std::string out;
    for (size_t i = 0; i < cpus.size();) {
        size_t j = i;
        while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
        out += (out.empty() ? "" : ",") + (j == i ? fmt::format("{}", cpus[i]) : fmt::format("{}-{}", cpus[i], cpus[j]));
        i = j + 1;
    }
    return out.empty() ? "-" : out;
}

} // namespace

std::string to_text(const machine &m) {
    std::string out;
    out += "CPU\n";
    out += fmt::format("  model          {}\n", m.cpu_model.empty() ? "(unknown)" : m.cpu_model);
    out += fmt::format("  packages       {}\n  cores          {}\n  logical CPUs   {}\n", m.packages, m.cores, m.pus);
    std::string isa;
    for (const auto &[name, on] : {std::pair{"avx2", m.avx2}, {"fma", m.fma}, {"f16c", m.f16c}, {"avx512f", m.avx512f}})
        if (on) isa += (isa.empty() ? "" : " ") + std::string(name);
    out += fmt::format("  SIMD           {}\n", isa.empty() ? "(none of avx2 fma f16c avx512f)" : isa);
    out += "Memory\n";
    out += fmt::format("  total          {}\n  available      {}\n", gib(m.total_ram), gib(m.available_ram));
    out += "NUMA nodes\n";
    for (const numa_node &n : m.numa)
        out += fmt::format("  node {:<3} {:>12}  CPUs {}\n", n.os_index, gib(n.memory_bytes), cpu_list(n.cpus));
    out += "Caches\n";
    for (const cache_info &c : m.caches) out += fmt::format("  L{}  {:>4} x {}\n", c.level, c.count, size_text(c.size_bytes));
    out += "GPUs\n";
    if (m.gpus.empty()) out += "  (none found on PCI)\n";
    for (const pci_gpu &g : m.gpus)
        out += fmt::format("  {}  {} {} [{:04x}:{:04x}]  NUMA {}\n", g.bus_id, g.vendor, g.name, g.vendor_id, g.device_id,
                           g.numa_node < 0 ? std::string("?") : std::to_string(g.numa_node));
    return out;
}

nlohmann::json to_json(const machine &m) {
    nlohmann::json j;
    j["packages"] = m.packages;
    j["cores"] = m.cores;
    j["pus"] = m.pus;
    j["cpu_model"] = m.cpu_model;
    j["isa"] = {{"avx2", m.avx2}, {"fma", m.fma}, {"f16c", m.f16c}, {"avx512f", m.avx512f}};
    j["total_ram"] = m.total_ram;
    j["available_ram"] = m.available_ram;
    j["one_pu_per_core"] = m.one_pu_per_core;
    j["numa"] = nlohmann::json::array();
    for (const numa_node &n : m.numa)
        j["numa"].push_back({{"os_index", n.os_index}, {"memory_bytes", n.memory_bytes}, {"cpus", n.cpus}});
    j["caches"] = nlohmann::json::array();
    for (const cache_info &c : m.caches)
        j["caches"].push_back({{"level", c.level}, {"size_bytes", c.size_bytes}, {"count", c.count}});
    j["gpus"] = nlohmann::json::array();
    for (const pci_gpu &g : m.gpus)
        j["gpus"].push_back({{"vendor", g.vendor},
                             {"name", g.name},
                             {"bus_id", g.bus_id},
                             {"numa_node", g.numa_node},
                             {"vendor_id", g.vendor_id},
                             {"device_id", g.device_id}});
    return j;
}

} // namespace strata::topology
