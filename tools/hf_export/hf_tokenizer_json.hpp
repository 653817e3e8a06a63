// A GGUF SentencePiece vocabulary (tokenizer.ggml.model "llama") as Hugging Face's tokenizer.json and
// tokenizer_config.json, the way transformers' LlamaConverter writes them: a BPE model with byte fallback whose merges
// come from the pieces' scores (SentencePieceExtractor), the "▁" normalizer, BOS added by the post-processor.
#pragma once

#include "gguf/gguf_file.hpp"

#include <nlohmann/json.hpp>

namespace hf_export {

struct tokenizer_files {
    nlohmann::ordered_json tokenizer;
    nlohmann::ordered_json config;
};

// Throws strata::error when the vocabulary is not a SentencePiece one this writer handles.
tokenizer_files spm_tokenizer_json(const strata::gguf::file &f);

} // namespace hf_export
