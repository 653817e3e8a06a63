// How the model splits among tensor-parallel ranks (#16 item 3), asked of its plugin once at start-up: the whole model
// is created on the file, asked whether it can run as parts (strata_model_arch_desc.tensor_parallel, ABI 1.29) and how
// each of its weights splits (tensor_split), and destroyed; each rank's tensor_parallel_shard then cuts its part.
#pragma once

#include "model_file/tensor_parallel_shard.hpp"
#include "plugin_host/registry.hpp"

#include <strata/plugin_abi.h>

#include <map>
#include <string>

namespace strata::engine {

struct tensor_splits {
    std::map<std::string, tensor_split_rule> rules; // every weight the model lists, with its split
    strata_model_hparams whole{};                    // the whole model's sizes (a rank's model holds its part)
};

// Throws strata::error saying why when the plugin cannot split this model (no slot, a plugin before 1.29, a model it
// answers no for) or a split it gives is malformed.
tensor_splits read_tensor_splits(const model_file &file, const plugins::registry &registry,
                                 const strata_host_services *host, const plugins::handle<strata_model_arch_desc> &arch,
                                 const std::string &model_path, int32_t size);

// A block's elements and bytes for each type, from the quant plugins (else GGUF's table), for cutting columns.
tensor_parallel_shard::block_lookup quant_blocks(const plugins::registry &registry);

} // namespace strata::engine
