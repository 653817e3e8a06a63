// A model file runs only when its model_arch plugin uses all of it. A tensor the model does not list as a weight, or
// an `<architecture>.` metadata key the plugin never read, is something the forward pass would silently leave out
// (RoPE frequency factors, biases, a RoPE scaling type, experts): the output would be wrong from the first token.
#pragma once

#include "model_file/model_file.hpp"

#include <strata/plugin_abi.h>

#include <set>
#include <string>

namespace strata::engine {

// Throws strata::error naming every unused tensor and key of `file` at once (capped list, with the total), and what
// to do. `keys_read` and `tensors_read` hold every metadata key and tensor the plugin asked for (found or not): a
// tensor is used when it is one of the model's weights (tensor_at) or the plugin read it itself; `plugin` names it.
void check_model_covers_file(const model_file &file, const std::string &arch, const strata_model_arch_desc &desc,
                             const strata_model *model, const std::set<std::string> &keys_read,
                             const std::set<std::string> &tensors_read, const std::string &plugin,
                             const std::string &path);

} // namespace strata::engine
