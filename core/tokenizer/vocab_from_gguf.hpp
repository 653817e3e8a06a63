// Reads a model's vocabulary from GGUF metadata (the tokenizer.ggml.* keys), with llama.cpp's defaults and rules:
// "llama" is SentencePiece, "gpt2" byte-level BPE with the pre-tokenizer named by tokenizer.ggml.pre.
#pragma once

#include "tokenizer/vocab.hpp"

namespace strata {

class model_file;

// Throws strata::error naming the file and key when the vocab is missing, of a kind Strata cannot run (WordPiece,
// Unigram, RWKV...: the message says which), or inconsistent.
vocab_data load_vocab(const model_file &f); // the metadata of a GGUF (or any model_file)

} // namespace strata
