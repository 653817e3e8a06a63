// Which NUMA node the pinned_ram tier's memory should live on when the device is a GPU: the node nearest the GPU on
// PCI, so copies to it do not cross the link between sockets. A pure function of the topology, so it is testable
// without a GPU; the engine applies it (engine_pinned_staging.cpp).
#pragma once

#include "topology/topology.hpp"

#include <cstdint>
#include <optional>
#include <string_view>

namespace strata::engine {

// The node to bind pinned_ram to, or none: when the user set [pinned_ram] numa_node (theirs wins, -1 included), when
// the device reported no bus id, when the topology does not know the device (VMs often show no PCI), or when the
// device is as near every node as any other (a one-node machine, or firmware that gives no locality). Where the
// device is near several but not all nodes (sub-NUMA clusters), the lowest of them.
std::optional<int> pinned_staging_node(const topology::machine &machine, std::string_view gpu_bus_id,
                                       std::optional<int64_t> user_numa_node);

} // namespace strata::engine
