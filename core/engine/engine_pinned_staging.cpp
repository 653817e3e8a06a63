// Engine: putting the pinned_ram tier's memory on the NUMA node nearest the GPU. Copies between the GPU and pinned
// host memory on the far socket cross the link between sockets, at a fraction of PCIe speed under load; on the near
// node they do not. The node comes from the device's PCI bus id and the start-up topology; the user's own
// [pinned_ram] numa_node (-1 included) always wins. Nothing here can fail start-up: without an answer the tier
// stays unbound, as before.
#include "engine/engine.hpp"

#include "common/log.hpp"
#include "engine/config_override_view.hpp"
#include "engine/pinned_staging_node.hpp"
#include "topology/topology.hpp"

#include <algorithm>

namespace strata::engine {

void engine::bind_pinned_staging() {
    static constexpr const char *tier = "pinned_ram";
    const auto &tiers = opts_.offload.tiers;
    const bool used = std::find(tiers.begin(), tiers.end(), tier) != tiers.end() ||
                      opts_.offload.kv_tier_bytes.count(tier) != 0;
    if (!used || !STRATA_HAS_SLOT(device_desc_.desc, pci_bus_id)) return;
    char bus_id[64] = {0};
    if (device_desc_.desc->pci_bus_id(device_, bus_id, sizeof bus_id) != 1 || bus_id[0] == '\0') return;

    auto it = opts_.offload.tier_configs.find(tier);
    const strata_config_view *user = it != opts_.offload.tier_configs.end() ? it->second : nullptr;
    std::optional<int64_t> user_node;
    if (int64_t v = 0; user != nullptr && user->get_int != nullptr && user->get_int(user->ctx, "numa_node", &v) == 1)
        user_node = v;

    if (user_node) {
        log::debug(tier, "numa_node = {} as set, whichever node is nearest the GPU at {}", *user_node, bus_id);
        return;
    }
    const topology::machine *machine = opts_.machine;
    topology::machine discovered;
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
        return;
    }
    pinned_ram_config_ = std::make_unique<config_override_view>(user, "numa_node", *node);
    opts_.offload.tier_configs[tier] = pinned_ram_config_->view();
    log::info(tier, "binding to NUMA node {}, nearest the GPU at {}", *node, bus_id);
}

} // namespace strata::engine
