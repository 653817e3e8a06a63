// Reads a Hugging Face tokenizer (tokenizer.json, with tokenizer_config.json beside it) into a vocab: the BPE model
// (vocab, merges, byte_fallback, unk, ignore_merges), the added tokens with their strip flags, and the normalizer,
// pre-tokenizer, post-processor and decoder turned into text_rules. The loader the HF-checkpoint path uses. Anything
// Strata cannot follow exactly (a WordPiece or Unigram model, a Lowercase normalizer, a Removed split...) is refused
// with the file and the JSON field, never approximated.
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/vocab.hpp"

namespace strata {

struct hf_tokenizer {
    vocab_data vocab;
    // tokenizer_config.json's chat_template: one unnamed ("default") or several named ones, in file order.
    std::vector<std::pair<std::string, std::string>> chat_templates;
};

// `path`: a model folder holding tokenizer.json (and optionally tokenizer_config.json), or the tokenizer.json itself.
// Throws strata::error naming the file and field.
hf_tokenizer load_hf_tokenizer(const std::filesystem::path &path);

// The same from the files' contents; `origin` names them in messages. `config_json` may be empty (no config file).
hf_tokenizer parse_hf_tokenizer(std::string_view tokenizer_json, std::string_view config_json, const std::string &origin);

} // namespace strata
