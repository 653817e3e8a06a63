// A small synthetic model for planner tests: sizes chosen so every expected number can be computed by hand.
#pragma once

#include "planner/memory_planner.hpp"

#include <fmt/format.h>

namespace strata::planner::test {

constexpr uint64_t MiB = 1ull << 20;
constexpr uint64_t GiB = 1ull << 30;

// n_layer layers of 100 MiB (attn 60 MiB + ffn 40 MiB), a 50 MiB embedding and a 50 MiB output. KV: 2 x 8 layers
// x 1 head x 128 x 2 bytes = 4096 bytes per token. Activations 10 MiB, overhead 64 MiB (the default).
inline inputs small_model(int32_t n_layer = 8) {
    inputs in;
    in.n_layer = n_layer;
    in.n_head_kv = 1;
    in.head_dim = 128;
    in.kv_type = STRATA_KV_F16;
    in.max_model_len = 1024;
    in.model_context_length = 2048;
    in.tensors.push_back({"token_embd.weight", -1, 50 * MiB});
    for (int32_t l = 0; l < n_layer; ++l) {
        in.tensors.push_back({fmt::format("blk.{}.attn", l), l, 60 * MiB});
        in.tensors.push_back({fmt::format("blk.{}.ffn", l), l, 40 * MiB});
    }
    in.tensors.push_back({"output.weight", n_layer, 50 * MiB});
    in.activation_bytes = 10 * MiB;
    in.device_kind = "cuda";
    in.device_total = 80 * GiB;
    in.physical_ram = 64 * GiB;
    in.tiers.push_back({"nvme", 100 * GiB, 2e9, false});
    return in;
}

inline const placement &find(const plan &p, const std::string &tensor) {
    for (const auto &pl : p.placements)
        if (pl.tensor == tensor) return pl;
    throw std::runtime_error("no placement for " + tensor);
}

} // namespace strata::planner::test
