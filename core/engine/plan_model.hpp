// `runtime plan`: the memory plan start-up would make and print, without loading weights or serving.
#pragma once

#include "engine/engine.hpp"
#include "planner/memory_planner.hpp"

#include <vector>

namespace strata::engine {

// One pipeline rank's plan (the whole model's without pipeline parallel).
struct rank_plan {
    pipeline_stage stage;
    int32_t tensor_parallel_rank = 0, tensor_parallel_size = 1; // a tensor-parallel rank's plan: its share
    planner::inputs inputs;
    planner::plan plan;
};

// Runs the engine's own start-up with plan_only (engine_options::plan_only): the same model checks, device choice
// (with auto's fallback), measurements and hybrid decisions as serving, so the plans printed here are the plans
// start-up prints with the same options. Every pipeline rank's, rank 0 first (one without pipeline parallel).
std::vector<rank_plan> plan_model(const plugins::registry &registry, const strata_host_services *host,
                                  engine_options opts);

} // namespace strata::engine
