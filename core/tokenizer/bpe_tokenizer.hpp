// Byte-level BPE, bit-exact with llama.cpp's llm_tokenizer_bpe_session (tokenizer.ggml.model "gpt2"): the
// pre-tokenizer cuts the text into words, each word's bytes are spelled in GPT-2's byte alphabet, and adjacent
// symbols merge lowest merge rank first. A symbol that is no token falls back to single-byte tokens.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/pre_tokenizer.hpp"
#include "tokenizer/tokenizer.hpp"

namespace strata {

class bpe_tokenizer final : public tokenizer {
  public:
    // Reads the merges ("left right" lines; the first of a repeated pair wins) and compiles the pre-tokenizer
    // named by the vocab. Throws strata::error naming the file for an unknown pre-tokenizer or a bad merge.
    explicit bpe_tokenizer(class vocab v);

  private:
    struct merge {
        int32_t rank;
        int32_t result; // piece id of left+right
    };
    void encode_text(std::string_view text, bool after_special, std::vector<int32_t> &out) const override;
    int32_t intern(std::string_view text);
    const merge *find_merge(int32_t left, int32_t right) const;

    pre_tokenizer pre_;
    bool ignore_merges_ = false;
    bool newline_words_whole_ = false;
    bool escape_whitespace_ = false;
    bool raw_bytes_ = false;
    // Every text a symbol can have that can take part in a merge, by id: ids below n_vocab are the token ids
    // (the text's id as vocab::find gives it); the others are merge sides and results that are no token.
    struct text_hash {
        using is_transparent = void;
        size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
    };
    std::unordered_map<std::string, int32_t, text_hash, std::equal_to<>> piece_ids_;
    int32_t next_piece_id_ = 0;
    std::unordered_map<uint64_t, merge> merges_; // (left piece << 32 | right piece) -> merge
    std::vector<int32_t> byte_piece_;            // byte -> piece id of its one-character symbol, or -1
    std::vector<int32_t> byte_fallback_;         // byte -> the token that stands for it alone, or -1
};

} // namespace strata
