// [pinned_ram] numa_node: checking the node against this machine, and binding the tier's mapping to it before any of
// its pages is touched (mlock then faults every page in on that node). The mechanism is numa_ram's: hwloc with
// HWLOC_MEMBIND_BIND, strict.
#pragma once

#include <strata/plugin_abi.h>

#include <hwloc.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>

namespace strata::pinned_ram {

class numa_node_binding {
  public:
    // Reads numa_node from cfg: absent or -1 is no binding (and loads no topology). A value below -1 or a node this
    // machine lacks fills st (STRATA_ERR_INVALID_ARGUMENT, naming the nodes it has) and returns false.
    bool load(const strata_config_view *cfg, strata_status *st);

    int node() const { return node_; }                  // -1: no binding
    uint64_t node_memory() const { return node_memory_; } // the node's RAM as hwloc reports it (0 when unknown)
    int machine_nodes() const { return machine_nodes_; }

    // Binds [p, p + bytes) to the node; 0, or the errno of the failure (ENOSYS/EXDEV/EPERM: the OS cannot bind here).
    int bind(void *p, size_t bytes) const;

  private:
    struct topology_deleter {
        void operator()(hwloc_topology_t t) const { hwloc_topology_destroy(t); }
    };
    std::unique_ptr<std::remove_pointer_t<hwloc_topology_t>, topology_deleter> topology_;
    int node_ = -1;
    uint64_t node_memory_ = 0;
    int machine_nodes_ = 0;
};

} // namespace strata::pinned_ram
