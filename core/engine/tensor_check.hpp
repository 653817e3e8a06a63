// llama.cpp's --check-tensors ([model] check_tensors): every weight row of the file through its quant plugin's
// find_nonfinite (ABI 1.10) before anything runs, so a damaged file (a NaN or infinite block scale, minimum or float
// weight) is refused naming the tensor, the row and the block, instead of producing NaN logits. Reads every byte of
// the file once (with progress), which is why it is opt-in, as in llama.cpp.
#pragma once

#include "model_file/model_file.hpp"
#include "plugin_host/registry.hpp"

#include <string>

namespace strata::engine {

// Throws strata::error for the first damaged block found. A tensor whose type no loaded quant plugin checks (a
// pre-1.10 plugin) is named in one warning, not refused.
void check_tensors(const model_file &file, const plugins::registry &registry, const std::string &path);

} // namespace strata::engine
