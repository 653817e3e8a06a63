// What `--model PATH` names: a GGUF file, or an HF checkpoint folder (config.json + safetensors + tokenizer.json).
#pragma once

#include "common/mapped_file.hpp"
#include "model_file/model_file.hpp"
#include "tokenizer/vocab.hpp"

#include <memory>
#include <string>

namespace strata {

// Throws strata::error naming the path and what is wrong with it.
std::unique_ptr<model_file> open_model_file(const std::string &path, const open_options &how = {});

// The model's vocabulary: the folder's tokenizer.json, or the GGUF's tokenizer.ggml.* metadata.
vocab_data load_model_vocab(const model_file &f);

} // namespace strata
