// A pipeline or tensor-parallel rank that is a process of its own (#16, under mpirun; ranks 1..N-1): it waits for rank
// 0's engine to start it (its stage, the context length, the model's fingerprint, the device kind), opens the same
// model file and checks its fingerprint, loads and places its layers (a tensor-parallel rank: its share of every
// layer, tensor_parallel_shard) with its own memory plan, tiers, offload and NVMe streaming, then
// serves rank 0's commands (pipeline_protocol.hpp) until told to stop: its KV pools, each step's part, its part of
// KV blocks moved between tiers. Errors at start-up go back to rank 0, which names the rank; a step that fails ends
// the job (the transport's abort) after saying why.
#pragma once

#include "engine/engine_options.hpp"
#include "plugin_host/registry.hpp"

#include <strata/plugin_abi.h>

namespace strata::engine {

// Returns the process's exit code: 0 after rank 0's stop, 2 when it could not start.
int serve_pipeline_rank(const plugins::registry &registry, const strata_host_services *host,
                        const engine_options &opts);

} // namespace strata::engine
