// Reads a SentencePiece (tokenizer.ggml.model = "llama") vocabulary from GGUF metadata.
#pragma once

#include "tokenizer/spm_tokenizer.hpp"

namespace strata {

namespace gguf {
class file;
}

// Throws strata::error naming the file and key when the vocab is missing, is not SPM, or is inconsistent.
spm_vocab load_spm_vocab(const gguf::file &f);

} // namespace strata
