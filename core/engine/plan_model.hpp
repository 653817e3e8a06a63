// `runtime plan`: the memory plan of a model and config without loading weights or starting a device.
#pragma once

#include "engine/engine.hpp"
#include "planner/memory_planner.hpp"

namespace strata::engine {

struct model_plan {
    planner::inputs inputs;
    planner::plan plan;
};

// Opens the GGUF (metadata and tensor table only), lets the model_arch plugin list its tensors, and plans them for
// the device named in opts (auto = the best scoring device plugin). Bandwidths come from the cache only.
model_plan plan_model(const plugins::registry &registry, const strata_host_services *host, const engine_options &opts);

} // namespace strata::engine
