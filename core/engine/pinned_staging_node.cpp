#include "engine/pinned_staging_node.hpp"

#include <algorithm>

namespace strata::engine {

std::optional<int> pinned_staging_node(const topology::machine &machine, std::string_view gpu_bus_id,
                                       std::optional<int64_t> user_numa_node) {
    if (user_numa_node.has_value() || gpu_bus_id.empty()) return std::nullopt;
    std::vector<int> near = topology::nearest_numa_nodes(machine, gpu_bus_id);
    if (near.empty()) return std::nullopt;
    // Near every node means no node is nearer: binding would only narrow where the memory may come from.
    const bool all = std::all_of(machine.numa.begin(), machine.numa.end(), [&](const topology::numa_node &n) {
        return std::find(near.begin(), near.end(), n.os_index) != near.end();
    });
    if (all) return std::nullopt;
    return *std::min_element(near.begin(), near.end());
}

} // namespace strata::engine
