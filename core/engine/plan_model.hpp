// `runtime plan`: the memory plan start-up would make and print, without loading weights or serving.
#pragma once

#include "engine/engine.hpp"
#include "planner/memory_planner.hpp"

namespace strata::engine {

struct model_plan {
    planner::inputs inputs;
    planner::plan plan;
};

// Runs the engine's own start-up with plan_only (engine_options::plan_only): the same model checks, device choice
// (with auto's fallback), measurements and hybrid decisions as serving, so the plan printed here is the plan start-up
// prints with the same options.
model_plan plan_model(const plugins::registry &registry, const strata_host_services *host, engine_options opts);

} // namespace strata::engine
