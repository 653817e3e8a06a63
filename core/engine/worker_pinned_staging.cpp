// Worker: putting page-locked tier memory on the NUMA node nearest the GPU. Copies between the GPU and pinned host
// memory on the far socket cross the link between sockets, at a fraction of PCIe speed under load; on the near node
// they do not. Every tier in use whose plugin declares an INT `numa_node` key (pinned_ram does) gets the node that
// the device's PCI bus id and the start-up topology point to; the user's own `numa_node` (-1 included) always wins.
// No tier is named here. Nothing can fail start-up: without an answer a tier stays unbound, as before.
#include "engine/worker.hpp"
#include "engine/engine_options.hpp"

#include "common/log.hpp"
#include "engine/config_override_view.hpp"
#include "engine/pinned_staging_node.hpp"
#include "topology/topology.hpp"

#include <algorithm>
#include <cstring>
#include <set>

namespace strata::engine {

namespace {

// The tiers in use whose config table declares `numa_node` as an INT.
std::vector<std::string> tiers_with_numa_node(const plugins::registry &registry, const offload_options &o) {
    std::set<std::string> used(o.tiers.begin(), o.tiers.end());
    for (const auto &[name, bytes] : o.kv_tier_bytes) used.insert(name);
    std::vector<std::string> out;
    for (const auto &[table, keys] : registry.config_tables()) {
        if (used.count(table) == 0) continue;
        for (uint32_t i = 0; i < keys.second; ++i)
            if (std::strcmp(keys.first[i].name, "numa_node") == 0 && keys.first[i].type == STRATA_CONFIG_INT)
                out.push_back(table);
    }
    return out;
}

} // namespace

void worker::bind_pinned_staging() {
    if (!STRATA_HAS_SLOT(device_desc_.desc, pci_bus_id)) return;
    const std::vector<std::string> tiers = tiers_with_numa_node(registry_, offload_);
    if (tiers.empty()) return;
    char bus_id[64] = {0};
    if (device_desc_.desc->pci_bus_id(device_, bus_id, sizeof bus_id) != 1 || bus_id[0] == '\0') return;

    const topology::machine *machine = opts_.machine;
    topology::machine discovered;
    for (const std::string &tier : tiers) {
        auto it = offload_.tier_configs.find(tier);
        const strata_config_view *user = it != offload_.tier_configs.end() ? it->second : nullptr;
        std::optional<int64_t> user_node;
        if (int64_t v = 0; user != nullptr && user->get_int != nullptr && user->get_int(user->ctx, "numa_node", &v) == 1)
            user_node = v;
        if (user_node) {
            log::debug(tier, "numa_node = {} as set, whichever node is nearest the GPU at {}", *user_node, bus_id);
            continue;
        }
        if (machine == nullptr) {
            try {
                discovered = topology::discover();
                machine = &discovered;
            } catch (const std::exception &e) {
                log::debug(tier, "no topology to place it near the GPU at {}: {}", bus_id, e.what());
                return;
            }
        }
        const std::optional<int> node = pinned_staging_node(*machine, bus_id, user_node);
        if (!node) {
            log::debug(tier, "not bound: no NUMA node is nearer the GPU at {} than the others, or hwloc does not see it",
                       bus_id);
            continue;
        }
        staging_configs_.push_back(std::make_unique<config_override_view>(user, "numa_node", *node));
        offload_.tier_configs[tier] = staging_configs_.back()->view();
        log::info(tier, "binding to NUMA node {}, nearest the GPU at {}", *node, bus_id);
    }
}

} // namespace strata::engine
