// tier `numa_ram`: host RAM bound to chosen NUMA node(s) with hwloc, so weights sit next to the cores that read them.
//
// Key decisions:
//  - One arena of the planner's budget (capacity_bytes; [numa_ram] size when that is 0) allocated with
//    hwloc_alloc_membind(HWLOC_MEMBIND_BIND). Pages are not touched at create: the bind policy is attached to the
//    mapping, so pages land on the chosen nodes whichever thread first writes them, and create stays fast for large
//    budgets.
//  - nodes = "auto" picks the node(s) holding the CPUs this process may run on (what the CPU device computes with;
//    the tier ABI does not say which device will read the tier, so the CPU binding is the best evidence); node 0
//    when hwloc cannot tell. An explicit list ("0,1") is checked against the machine and a wrong node is refused
//    with the list of existing nodes.
//  - Strict binding first; where the OS cannot bind (ENOSYS/EXDEV, e.g. a container without mbind), a warning and
//    an unbound allocation rather than no tier at all.
//  - Regions come from the shared first-fit allocator (../common/region_allocator.hpp); map() returns the address.
#include "../common/arena_tier_desc.hpp"
#include "../common/host_arena.hpp"

#include <strata/plugin.hpp>

#include <hwloc.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

constexpr const char *plugin_name = "numa_ram";

using strata::tier::byte_text;

struct topology_deleter {
    void operator()(hwloc_topology_t t) const { hwloc_topology_destroy(t); }
};
using topology_ptr = std::unique_ptr<std::remove_pointer_t<hwloc_topology_t>, topology_deleter>;

struct bitmap_deleter {
    void operator()(hwloc_bitmap_t b) const { hwloc_bitmap_free(b); }
};
using bitmap_ptr = std::unique_ptr<std::remove_pointer_t<hwloc_bitmap_t>, bitmap_deleter>;

struct numa_tier {
    topology_ptr topology; // hwloc_free needs the topology the memory was allocated with
    void *memory = nullptr;
    size_t length = 0;
    std::unique_ptr<strata::tier::host_arena> arena;

    ~numa_tier() {
        arena.reset();
        if (memory != nullptr) hwloc_free(topology.get(), memory, length);
    }
};


std::string bitmap_text(hwloc_const_bitmap_t b) {
    char *s = nullptr;
    if (hwloc_bitmap_list_asprintf(&s, b) < 0 || s == nullptr) return "?";
    std::string out(s);
    std::free(s);
    return out;
}

std::vector<unsigned> existing_nodes(hwloc_topology_t topo) {
    std::vector<unsigned> nodes;
    for (hwloc_obj_t n = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, nullptr); n != nullptr;
         n = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, n))
        nodes.push_back(n->os_index);
    return nodes;
}

std::string nodes_text(const std::vector<unsigned> &nodes) {
    std::string s;
    for (unsigned n : nodes) s += (s.empty() ? "" : ", ") + std::to_string(n);
    return s.empty() ? "none" : s;
}

// The nodes holding the CPUs this process may run on; node 0 (the first node) when that cannot be determined.
bool auto_nodes(hwloc_topology_t topo, hwloc_bitmap_t nodeset) {
    bitmap_ptr cpus(hwloc_bitmap_alloc());
    if (cpus && hwloc_get_cpubind(topo, cpus.get(), HWLOC_CPUBIND_PROCESS) == 0) {
        hwloc_cpuset_to_nodeset(topo, cpus.get(), nodeset);
        if (!hwloc_bitmap_iszero(nodeset)) return true;
    }
    hwloc_obj_t first = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, nullptr);
    if (first == nullptr) return false;
    hwloc_bitmap_only(nodeset, first->os_index);
    return true;
}

// Parses "0,1" into nodeset; fills st and returns false on a malformed list or a node this machine lacks.
bool listed_nodes(hwloc_topology_t topo, const std::string &spec, hwloc_bitmap_t nodeset, strata_status *st) {
    const std::vector<unsigned> existing = existing_nodes(topo);
    size_t pos = 0;
    while (pos <= spec.size()) {
        size_t comma = spec.find(',', pos);
        if (comma == std::string::npos) comma = spec.size();
        std::string item = spec.substr(pos, comma - pos);
        const size_t b = item.find_first_not_of(" \t");
        const size_t e = item.find_last_not_of(" \t");
        item = b == std::string::npos ? std::string() : item.substr(b, e - b + 1);
        char *end = nullptr;
        errno = 0;
        const unsigned long node = item.empty() ? 0 : std::strtoul(item.c_str(), &end, 10);
        if (item.empty() || item[0] == '-' || end == nullptr || *end != '\0' || errno != 0) {
            strata::plugin::fail(st, STRATA_ERR_INVALID_ARGUMENT,
                                 "numa_ram: nodes = \"%s\" is neither \"auto\" nor a comma-separated list of NUMA node "
                                 "numbers such as \"0,1\" (this machine has nodes %s)",
                                 spec.c_str(), nodes_text(existing).c_str());
            return false;
        }
        bool found = false;
        for (unsigned n : existing) found = found || n == node;
        if (!found) {
            strata::plugin::fail(st, STRATA_ERR_INVALID_ARGUMENT,
                                 "numa_ram: NUMA node %lu does not exist; this machine has nodes %s (set [numa_ram] "
                                 "nodes to some of them, or to \"auto\")",
                                 node, nodes_text(existing).c_str());
            return false;
        }
        hwloc_bitmap_set(nodeset, static_cast<unsigned>(node));
        pos = comma + 1;
    }
    return true;
}

strata_tier *create(const strata_tier_create_args *args, strata_status *st) {
    return strata::plugin::guarded_create<strata_tier>(st, [&]() -> strata_tier * {
        if (args == nullptr) {
            strata::plugin::fail(st, STRATA_ERR_INVALID_ARGUMENT, "numa_ram: create: args is NULL");
            return nullptr;
        }
        const strata::plugin::config cfg(args->config);
        uint64_t bytes = args->capacity_bytes;
        if (bytes == 0) bytes = static_cast<uint64_t>(cfg.get_int("size").value_or(0));
        if (bytes == 0) {
            strata::plugin::fail(st, STRATA_ERR_INVALID_ARGUMENT,
                                 "numa_ram: no budget: the planner gave 0 bytes and [numa_ram] size is 0; set size "
                                 "(e.g. size = \"8GiB\") or give this tier a budget");
            return nullptr;
        }
        const uint64_t page = 4096;
        if (bytes > UINT64_MAX - page) bytes = UINT64_MAX - page;
        const uint64_t length = (bytes + page - 1) / page * page;

        auto t = std::make_unique<numa_tier>();
        hwloc_topology_t raw = nullptr;
        if (hwloc_topology_init(&raw) != 0) throw std::runtime_error("numa_ram: hwloc_topology_init failed");
        t->topology.reset(raw);
        if (hwloc_topology_load(raw) != 0) {
            strata::plugin::fail(st, STRATA_ERR_INTERNAL, "numa_ram: hwloc could not read this machine's topology: %s",
                                 std::strerror(errno));
            return nullptr;
        }

        const std::string spec = cfg.get_string("nodes").value_or("auto");
        bitmap_ptr nodeset(hwloc_bitmap_alloc());
        if (!nodeset) throw std::bad_alloc();
        if (spec == "auto") {
            if (!auto_nodes(raw, nodeset.get())) {
                strata::plugin::fail(st, STRATA_ERR_INTERNAL, "numa_ram: hwloc reports no NUMA node on this machine");
                return nullptr;
            }
        } else if (!listed_nodes(raw, spec, nodeset.get(), st)) {
            return nullptr;
        }

        void *mem = hwloc_alloc_membind(raw, static_cast<size_t>(length), nodeset.get(), HWLOC_MEMBIND_BIND,
                                        HWLOC_MEMBIND_BYNODESET | HWLOC_MEMBIND_STRICT);
        if (mem == nullptr && (errno == ENOSYS || errno == EXDEV || errno == EPERM)) {
            strata::plugin::log(args->host, STRATA_LOG_WARN, plugin_name,
                                "cannot bind memory to NUMA node(s) %s here (%s); using unbound RAM instead",
                                bitmap_text(nodeset.get()).c_str(), std::strerror(errno));
            mem = hwloc_alloc_membind(raw, static_cast<size_t>(length), nodeset.get(), HWLOC_MEMBIND_BIND,
                                      HWLOC_MEMBIND_BYNODESET);
        }
        if (mem == nullptr) {
            strata::plugin::fail(st, STRATA_ERR_OUT_OF_MEMORY,
                                 "numa_ram: cannot allocate %s on NUMA node(s) %s: %s (lower the budget or add nodes)",
                                 byte_text(length).c_str(), bitmap_text(nodeset.get()).c_str(), std::strerror(errno));
            return nullptr;
        }
        t->memory = mem;
        t->length = static_cast<size_t>(length);
        t->arena = std::make_unique<strata::tier::host_arena>(plugin_name, static_cast<unsigned char *>(mem), length);
        strata::plugin::log(args->host, STRATA_LOG_DEBUG, plugin_name, "%s bound to NUMA node(s) %s",
                            byte_text(length).c_str(), bitmap_text(nodeset.get()).c_str());
        strata::plugin::ok(st);
        return reinterpret_cast<strata_tier *>(t.release()); // caller owns; frees with destroy
    });
}

// The memory of the nodes this configuration binds to (0 when the node list is invalid: create() says why).
uint64_t capacity_limit(const strata_tier_create_args *args, char *why, uint32_t why_cap) {
    hwloc_topology_t raw = nullptr;
    if (hwloc_topology_init(&raw) != 0) return 0;
    topology_ptr topo(raw);
    if (hwloc_topology_load(raw) != 0) return 0;
    const strata::plugin::config cfg(args != nullptr ? args->config : nullptr);
    const std::string spec = cfg.get_string("nodes").value_or("auto");
    bitmap_ptr nodeset(hwloc_bitmap_alloc());
    strata_status st{};
    if (!nodeset || !(spec == "auto" ? auto_nodes(raw, nodeset.get()) : listed_nodes(raw, spec, nodeset.get(), &st))) {
        return 0;
    }
    uint64_t bytes = 0;
    for (hwloc_obj_t n = hwloc_get_next_obj_by_type(raw, HWLOC_OBJ_NUMANODE, nullptr); n != nullptr;
         n = hwloc_get_next_obj_by_type(raw, HWLOC_OBJ_NUMANODE, n)) {
        if (hwloc_bitmap_isset(nodeset.get(), n->os_index)) bytes += n->attr->numanode.local_memory;
    }
    // Some VMs report less per node than the kernel hands out; the RAM available is the practical bound then too.
    const uint64_t avail = strata::tier::available_ram_bytes();
    if (bytes == 0 || (avail != 0 && avail < bytes)) bytes = avail;
    if (why != nullptr && why_cap > 0) {
        std::snprintf(why, why_cap, "the memory of NUMA node(s) %s", bitmap_text(nodeset.get()).c_str());
    }
    return bytes;
}

const strata_tier_desc tier_desc =
    strata::tier::arena_tier_slots<numa_tier>::descriptor(plugin_name, create, capacity_limit);

const strata_descriptor_header *const descriptors[] = {&tier_desc.header};

const strata_config_key config_keys[] = {
    {"nodes", STRATA_CONFIG_STRING, "\"auto\"", 0.0, 0.0,
     "NUMA nodes to bind to: \"auto\" (the nodes of this process's CPUs) or a list such as \"0,1\"", nullptr,
     nullptr},
    {"size", STRATA_CONFIG_BYTES, "0", 0.0, 0.0,
     "bytes of NUMA-bound RAM when the planner gives this tier no budget (0 = use the planner's budget)", nullptr,
     nullptr},
};

const strata_plugin_info plugin_info = strata::plugin::make_info(plugin_name, "0.1.0", "MIT",
    "Host RAM bound to chosen NUMA nodes with hwloc",
    descriptors, config_keys);

} // namespace

STRATA_PLUGIN_DEFINE(plugin_info)
