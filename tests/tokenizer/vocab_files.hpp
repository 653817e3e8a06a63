// Shared helpers for the tokenizer tests: paths to the shared models and loading a tokenizer from a GGUF.
#pragma once

#include <string>

#include "gguf/gguf_file.hpp"
#include "tokenizer/spm_tokenizer.hpp"
#include "tokenizer/vocab_from_gguf.hpp"

namespace strata::test {

inline std::string shared_model(const std::string &rel) { return std::string(STRATA_SHARED_DIR) + "/models/" + rel; }

inline spm_tokenizer tokenizer_from(const std::string &rel) {
    const gguf::file f = gguf::file::open(shared_model(rel));
    return spm_tokenizer(load_spm_vocab(f));
}

} // namespace strata::test
