// Gathers what the memory planner needs: the model's tensors by layer (from the model_arch plugin), its KV shape,
// the device budget knobs, the tiers with their capacities and measured bandwidths, and the machine's limits.
#pragma once

#include "engine/scheduler.hpp"
#include "engine/tiered_weights.hpp"
#include "planner/memory_planner.hpp"
#include "plugin_host/registry.hpp"

#include <strata/plugin_abi.h>

namespace strata::topology {
struct machine;
}

namespace strata::engine {

struct model_shape {
    const strata_model_arch_desc *arch = nullptr;
    const strata_model *model = nullptr;
    strata_model_hparams hp{};
    int32_t max_model_len = 0;
    uint64_t activation_bytes = 0;
    uint32_t kv_type = STRATA_KV_F32; // the KV cache's element type ([memory] kv_cache_dtype)
    // A pipeline rank plans layers [layer_first, layer_end) only, numbered from 0, with the embedding on the first
    // rank and the final norm and classifier on the last (layer_end 0: the whole model).
    int32_t layer_first = 0, layer_end = 0;
};

// The bytes of the model's weights by slot: [0] the embedding, [1 + l] layer l, [n_layer + 1] the final norm and
// classifier (a tied classifier counts in both slots: the first and the last pipeline rank each hold it).
std::vector<uint64_t> layer_slot_bytes(const strata_model_arch_desc *arch, const strata_model *model, int32_t n_layer);

// Device memory the step loop needs besides weights and KV: the forward pass's workspace for a full step of
// max_num_batched_tokens tokens and one row of logits per sequence.
uint64_t activation_bytes(const strata_model_arch_desc *arch, const strata_model *model, const strata_model_hparams &hp,
                          const scheduler_config &sc);

// Tier bandwidths come from the cache, or are measured on a small temporary instance of each tier (and cached)
// when opts.measure_bandwidth is set and the cache has none or opts.remeasure asks. RAM sizes come from `machine`
// (the start-up discovery) or, when it is null, from a discovery of its own.
// A mixture of experts' routed expert weights, by llama.cpp's name pattern (LLM_FFN_EXPS_REGEX: ffn_{up,down,gate}_exps):
// not the router, not a shared expert.
bool is_routed_expert(const std::string &name);

// Bytes a weight takes wherever it is placed: its rows, and its input order after them (GPTQ act-order, ABI 1.19).
inline uint64_t weight_bytes(const strata_tensor_view &v) {
    return static_cast<uint64_t>(v.row_bytes * v.rows) +
           (v.input_order != nullptr ? static_cast<uint64_t>(v.cols) * sizeof(int32_t) : 0);
}

planner::inputs make_plan_inputs(const model_shape &m, const offload_options &opts, const plugins::registry &registry,
                                 const strata_host_services *host, const std::string &device_kind,
                                 const topology::machine *machine = nullptr);

} // namespace strata::engine
