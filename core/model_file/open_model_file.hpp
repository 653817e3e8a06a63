// What `--model PATH` names: a GGUF file, or an HF checkpoint folder (config.json + safetensors + tokenizer.json).
#pragma once

#include "common/mapped_file.hpp"
#include "model_file/model_file.hpp"
#include "tokenizer/vocab.hpp"

#include <memory>
#include <string>

namespace strata {

// Throws strata::error naming the path and what is wrong with it. `plan_only`: an HF folder may lack its shards and
// tokenizer (hf_checkpoint::open).
std::unique_ptr<model_file> open_model_file(const std::string &path, const open_options &how = {},
                                            bool plan_only = false);

// Whether the model carries a vocabulary (an HF folder planned from config.json alone does not).
bool has_vocabulary(const model_file &f);

// The model's vocabulary: the folder's tokenizer.json, or the GGUF's tokenizer.ggml.* metadata.
vocab_data load_model_vocab(const model_file &f);

} // namespace strata
