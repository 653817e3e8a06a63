#include "numa_node_binding.hpp"

#include <strata/plugin.hpp>

#include <cerrno>
#include <cstring>

namespace strata::pinned_ram {

namespace {

std::string node_list(hwloc_topology_t topo) {
    std::string s;
    for (hwloc_obj_t n = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, nullptr); n != nullptr;
         n = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, n))
        s += (s.empty() ? "" : ", ") + std::to_string(n->os_index);
    return s.empty() ? "none" : s;
}

} // namespace

bool numa_node_binding::load(const strata_config_view *cfg, strata_status *st) {
    const std::optional<int64_t> value = strata::plugin::config(cfg).get_int("numa_node");
    if (!value || *value == -1) return true;
    if (*value < -1) {
        strata::plugin::fail(st, STRATA_ERR_INVALID_ARGUMENT,
                             "pinned_ram: numa_node = %lld is not a NUMA node; set a node number, or -1 for no binding",
                             static_cast<long long>(*value));
        return false;
    }
    hwloc_topology_t raw = nullptr;
    if (hwloc_topology_init(&raw) != 0) {
        strata::plugin::fail(st, STRATA_ERR_INTERNAL, "pinned_ram: hwloc_topology_init failed");
        return false;
    }
    topology_.reset(raw);
    if (hwloc_topology_load(raw) != 0) {
        strata::plugin::fail(st, STRATA_ERR_INTERNAL, "pinned_ram: hwloc could not read this machine's topology: %s",
                             std::strerror(errno));
        return false;
    }
    machine_nodes_ = hwloc_get_nbobjs_by_type(raw, HWLOC_OBJ_NUMANODE);
    const hwloc_obj_t node = *value <= static_cast<int64_t>(UINT32_MAX)
                                 ? hwloc_get_numanode_obj_by_os_index(raw, static_cast<unsigned>(*value))
                                 : nullptr;
    if (node == nullptr) {
        strata::plugin::fail(st, STRATA_ERR_INVALID_ARGUMENT,
                             "pinned_ram: NUMA node %lld does not exist; this machine has nodes %s (set [pinned_ram] "
                             "numa_node to one of them, or to -1 for no binding)",
                             static_cast<long long>(*value), node_list(raw).c_str());
        return false;
    }
    node_ = static_cast<int>(node->os_index);
    node_memory_ = node->attr != nullptr ? node->attr->numanode.local_memory : 0;
    return true;
}

int numa_node_binding::bind(void *p, size_t bytes) const {
    if (node_ < 0 || !topology_) return 0;
    const hwloc_bitmap_t nodeset = hwloc_bitmap_alloc();
    if (nodeset == nullptr) return ENOMEM;
    hwloc_bitmap_only(nodeset, static_cast<unsigned>(node_));
    const int rc = hwloc_set_area_membind(topology_.get(), p, bytes, nodeset, HWLOC_MEMBIND_BIND,
                                          HWLOC_MEMBIND_BYNODESET | HWLOC_MEMBIND_STRICT);
    const int err = rc == 0 ? 0 : (errno != 0 ? errno : EINVAL);
    hwloc_bitmap_free(nodeset);
    return err;
}

} // namespace strata::pinned_ram
