// tier `pinned_ram`: page-locked host memory, so weights kept here are never swapped out and a GPU device could DMA
// from them directly.
//
// Key decisions:
//  - One arena of the whole budget, mapped with mmap(MAP_POPULATE) and locked with mlock at create. Locking at
//    create (not per region) makes the budget a promise: if the RAM cannot be locked, the user hears it at start-up
//    with the reason (RLIMIT_MEMLOCK, usually) instead of a slow, swapping run later.
//  - The budget is the planner's capacity_bytes; [pinned_ram] size is used only when the planner gives 0, which lets
//    the tier be used stand-alone. It is rounded up to whole pages.
//  - Regions are carved from the arena with the shared first-fit allocator (../common/region_allocator.hpp), aligned
//    to 4096 bytes; map() returns their address so the CPU can compute on them in place.
//  - numa_node = N binds the mapping to node N before mlock touches it (numa_node_binding.hpp), so a GPU's copies
//    from it do not cross the socket link; the engine sets it to the node nearest the GPU unless the user did.
//    Where the OS cannot bind (a container without mbind), a warning and unbound memory, as numa_ram does.
#include "../common/arena_tier_desc.hpp"
#include "../common/host_arena.hpp"
#include "numa_node_binding.hpp"

#include <strata/plugin.hpp>

#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iterator>
#include <memory>
#include <string>

namespace {

constexpr const char *plugin_name = "pinned_ram";
constexpr int64_t max_numa_node = 4095; // well above any machine's node count; hwloc names the real ones

using strata::tier::byte_text;

struct pinned_tier {
    void *mapping = nullptr;
    size_t length = 0;
    std::unique_ptr<strata::tier::host_arena> arena;

    ~pinned_tier() {
        if (mapping != nullptr) {
            munlock(mapping, length);
            munmap(mapping, length);
        }
    }
};


std::string memlock_limit_text() {
    rlimit lim{};
    if (getrlimit(RLIMIT_MEMLOCK, &lim) != 0) return "unknown";
    if (lim.rlim_cur == RLIM_INFINITY) return "unlimited";
    return byte_text(static_cast<uint64_t>(lim.rlim_cur));
}

strata_tier *create(const strata_tier_create_args *args, strata_status *st) {
    return strata::plugin::guarded_create<strata_tier>(st, [&]() -> strata_tier * {
        if (args == nullptr) {
            strata::plugin::fail(st, STRATA_ERR_INVALID_ARGUMENT, "pinned_ram: create: args is NULL");
            return nullptr;
        }
        uint64_t bytes = args->capacity_bytes;
        if (bytes == 0) bytes = static_cast<uint64_t>(strata::plugin::config(args->config).get_int("size").value_or(0));
        if (bytes == 0) {
            strata::plugin::fail(st, STRATA_ERR_INVALID_ARGUMENT,
                                 "pinned_ram: no budget: the planner gave 0 bytes and [pinned_ram] size is 0; set "
                                 "size (e.g. size = \"8GiB\") or give this tier a budget");
            return nullptr;
        }
        const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
        if (bytes > UINT64_MAX - page) bytes = UINT64_MAX - page; // mmap will refuse it below, with a clear message
        const uint64_t length = (bytes + page - 1) / page * page;

        strata::pinned_ram::numa_node_binding numa;
        if (!numa.load(args->config, st)) return nullptr;

        auto t = std::make_unique<pinned_tier>();
        // A bound mapping must not be populated before the binding: its pages would already sit on another node.
        void *p = mmap(nullptr, static_cast<size_t>(length), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | (numa.node() < 0 ? MAP_POPULATE : 0), -1, 0);
        if (p == MAP_FAILED) {
            const int err = errno;
            strata::plugin::fail(st, STRATA_ERR_OUT_OF_MEMORY, "pinned_ram: cannot map %s of RAM: %s (lower the budget)",
                                 byte_text(length).c_str(), std::strerror(err));
            return nullptr;
        }
        bool bound = false;
        if (numa.node() >= 0) {
            const int err = numa.bind(p, static_cast<size_t>(length));
            bound = err == 0;
            if (err == ENOSYS || err == EXDEV || err == EPERM) {
                strata::plugin::log(args->host, STRATA_LOG_WARN, plugin_name,
                                    "cannot bind memory to NUMA node %d here (%s); using unbound RAM instead",
                                    numa.node(), std::strerror(err));
            } else if (err != 0) {
                munmap(p, static_cast<size_t>(length));
                strata::plugin::fail(st, STRATA_ERR_INTERNAL, "pinned_ram: binding %s to NUMA node %d failed: %s",
                                     byte_text(length).c_str(), numa.node(), std::strerror(err));
                return nullptr;
            }
        }
        if (mlock(p, static_cast<size_t>(length)) != 0) {
            const int err = errno;
            munmap(p, static_cast<size_t>(length));
            if (err == EPERM || err == ENOMEM || err == EAGAIN) {
                const std::string node_text = bound ? " (or NUMA node " + std::to_string(numa.node()) + " is full)" : "";
                strata::plugin::fail(st, STRATA_ERR_OUT_OF_MEMORY,
                                     "pinned_ram: cannot lock %s of RAM: RLIMIT_MEMLOCK is %s%s; raise it (ulimit -l, "
                                     "or LimitMEMLOCK= for systemd) or lower the budget (%s)",
                                     byte_text(length).c_str(), memlock_limit_text().c_str(), node_text.c_str(),
                                     std::strerror(err));
            } else {
                strata::plugin::fail(st, STRATA_ERR_INTERNAL, "pinned_ram: mlock of %s failed: %s",
                                     byte_text(length).c_str(), std::strerror(err));
            }
            return nullptr;
        }
        t->mapping = p;
        t->length = static_cast<size_t>(length);
        t->arena = std::make_unique<strata::tier::host_arena>(plugin_name, static_cast<unsigned char *>(p), length);
        if (bound) {
            strata::plugin::log(args->host, STRATA_LOG_DEBUG, plugin_name, "locked %s of RAM on NUMA node %d",
                                byte_text(length).c_str(), numa.node());
        } else {
            strata::plugin::log(args->host, STRATA_LOG_DEBUG, plugin_name, "locked %s of RAM", byte_text(length).c_str());
        }
        strata::plugin::ok(st);
        return reinterpret_cast<strata_tier *>(t.release()); // caller owns; frees with destroy
    });
}

// Locked RAM is bounded by the RAM available, by the bound node's memory on a machine of several nodes, and, for a
// process that cannot ignore it, by RLIMIT_MEMLOCK.
uint64_t capacity_limit(const strata_tier_create_args *args, char *why, uint32_t why_cap) {
    uint64_t limit = strata::tier::available_ram_bytes();
    std::string reason = "RAM available";
    strata::pinned_ram::numa_node_binding numa;
    strata_status ignored{}; // a bad numa_node is create()'s to report
    if (numa.load(args != nullptr ? args->config : nullptr, &ignored) && numa.node() >= 0 && numa.machine_nodes() > 1 &&
        numa.node_memory() > 0 && numa.node_memory() < limit) {
        limit = numa.node_memory();
        reason = "the memory of NUMA node " + std::to_string(numa.node());
    }
    rlimit lim{};
    if (geteuid() != 0 && getrlimit(RLIMIT_MEMLOCK, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY &&
        static_cast<uint64_t>(lim.rlim_cur) < limit) {
        limit = static_cast<uint64_t>(lim.rlim_cur);
        reason = "the locked-memory limit RLIMIT_MEMLOCK (raise it with ulimit -l or LimitMEMLOCK=)";
    }
    if (why != nullptr && why_cap > 0) std::snprintf(why, why_cap, "%s", reason.c_str());
    return limit;
}

const strata_tier_desc tier_desc =
    strata::tier::arena_tier_slots<pinned_tier>::descriptor(plugin_name, create, capacity_limit);

const strata_descriptor_header *const descriptors[] = {&tier_desc.header};

const strata_config_key config_keys[] = {
    {"size", STRATA_CONFIG_BYTES, "0", 0.0, 0.0,
     "bytes of page-locked RAM when the planner gives this tier no budget (0 = use the planner's budget)", nullptr,
     nullptr},
    {"numa_node", STRATA_CONFIG_INT, nullptr, -1.0, static_cast<double>(max_numa_node),
     "NUMA node to put the locked RAM on (-1 = no binding; unset = the node nearest the GPU when there is one)",
     nullptr, nullptr},
};

const strata_plugin_info plugin_info = strata::plugin::make_info(plugin_name, "0.1.0", "MIT",
    "Page-locked (mlock'ed) host RAM: weights that must never be swapped out",
    descriptors, config_keys);

} // namespace

STRATA_PLUGIN_DEFINE(plugin_info)
