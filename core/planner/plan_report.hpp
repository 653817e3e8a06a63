// The memory plan as people and programs read it: an aligned table printed at start-up and the JSON of
// `runtime plan --json`.
#pragma once

#include "planner/memory_planner.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace strata::planner {

// Consecutive layers that share one home and mode collapse into one row ("layers 0-15"); a layer split across two
// tiers gets one row per part ("layer 17"). A mixture of experts' routed experts get rows of their own after the
// layers' ("experts 0-15": every other tensor of those layers is in "layers 0-15"). Embedding (layer -1) and output
// (layer n_layer) rows are labelled so.
struct layer_group {
    std::string what;        // "embedding", "layers 0-15", "layer 17", "experts 0-15", "output"
    int32_t first_layer = 0; // -1 for the embedding, n_layer for the output
    int32_t last_layer = 0;
    std::string home; // "device", a tier name, or "" when no tier had room
    mode how = mode::resident;
    uint64_t bytes = 0;
    bool experts = false; // the routed experts of these layers
};
std::vector<layer_group> group_layers(const plan &p, const inputs &in);

// Rows for weights, KV cache, activations, staging ring, overhead, totals per tier against its budget, the KV
// capacity line, problems and notes, and "Using CPU offload with N <unit>" (the largest binary unit, two decimals, so
// 532 KiB reads as 532.00 KiB, not 0.00 GiB) when anything is offloaded.
std::string to_table(const plan &p, const inputs &in);

// Every plan field under its plan name, plus "groups" (the table's weight rows) and "tiers" (the configured tiers
// with capacity, use, bandwidth and addressability). Unplaced tensors have "home": null.
nlohmann::json to_json(const plan &p, const inputs &in);

} // namespace strata::planner
