// Byte-pair encoding over ranked merges, bit-exact with llama.cpp's llm_tokenizer_bpe_session for GGUF vocabularies
// (tokenizer.ggml.model "gpt2") and following Hugging Face tokenizers' BPE model for tokenizer.json ones: the text
// is normalized and cut into words by its rules (text_rules.hpp), each word's bytes are spelled in GPT-2's byte
// alphabet (or kept as UTF-8 characters), and adjacent symbols merge lowest merge rank first. A symbol no token
// spells falls back as the rules say (single bytes, <0xNN> byte tokens, or the unknown token).
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
    // Reads the merges (the first rank of a repeated pair wins) and compiles the rules' regexes.
    // Throws strata::error naming the file for a regex that cannot be compiled or rules it cannot follow.
    explicit bpe_tokenizer(class vocab v);

  private:
    struct merge {
        int32_t rank;
        int32_t result; // piece id of left+right
    };
    void encode_text(std::string_view text, bool after_special, bool at_start,
                     std::vector<int32_t> &out) const override;
    void encode_word(std::string_view utf8, std::vector<int32_t> &out) const;
    int32_t intern(std::string_view text);
    const merge *find_merge(int32_t left, int32_t right) const;

    const bpe_rules &rules_;
    pre_tokenizer pre_;
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
    std::vector<int32_t> byte_token_;            // byte -> the token the fallback rule uses for it, or -1
};

} // namespace strata
