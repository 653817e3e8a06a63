// How a byte-pair-encoding vocabulary reads text before its merges run: the normalization of each stretch between
// special tokens, the regex splits that cut it into words, and how symbols and unknown pieces are spelled. A GGUF
// names these by tokenizer.ggml.pre (llama.cpp's table, vocab_from_gguf.cpp); a tokenizer.json spells them out
// (hf_tokenizer.cpp). The BPE tokenizer only follows the rules.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace strata {

// Whose regex semantics a split follows.
enum class regex_dialect {
    llama_cpp, // llama.cpp's: \p{..} over its collapsed category text, ASCII \s \d \w (pre_tokenizer.cpp)
    unicode,   // Hugging Face tokenizers': Unicode properties and case folding (PCRE2 with UTF and UCP)
};

// What a split does with the text its regex matches (Hugging Face's SplitDelimiterBehavior).
enum class split_behavior {
    isolated,             // each match and each stretch between matches is a word
    merged_with_previous, // a match joins the stretch before it
    merged_with_next,     // a match joins the stretch after it
    contiguous,           // adjacent matches form one word
};

struct split_rule {
    std::string regex; // UTF-8
    regex_dialect dialect = regex_dialect::unicode;
    split_behavior behavior = split_behavior::isolated;
    bool invert = false; // the stretches between matches play the matches' part
};

// Where a prepended string goes.
enum class prepend_scheme {
    every_stretch, // before each stretch of text between special tokens (Prepend normalizer, Metaspace "always")
    text_start,    // only before the stretch at the very start of the input (Metaspace "first")
};

// What stands for a symbol no token spells.
enum class unknown_symbol {
    single_bytes, // llama.cpp's byte-level rule: each byte of the symbol's text as a one-byte token, when one exists
    byte_tokens,  // each byte of the symbol's UTF-8 as its <0xNN> token, when one exists (llama.cpp, raw-byte BPE)
    byte_fallback, // Hugging Face's byte_fallback: <0xNN> tokens when all exist, else the unknown token
    unknown_token, // the unknown token (Hugging Face without byte_fallback); fuse_unk joins a run of them
};

struct bpe_rules {
    // Normalization, in this order: NFC, the replacements, the prepended string.
    bool nfc = false;
    std::vector<std::pair<std::string, std::string>> replacements; // literal text -> text
    std::string prepend;                                          // e.g. U+2581 (SentencePiece-style)
    prepend_scheme prepend_where = prepend_scheme::every_stretch;
    bool prepend_unless_present = false; // Metaspace: not when the stretch already starts with it
    // Pre-tokenization: applied in order, each to every word the previous ones left.
    std::vector<split_rule> splits;
    // The model.
    bool byte_level = true; // symbols are GPT-2's byte characters (false: the UTF-8 characters themselves)
    bool ignore_merges = false;       // a word that is a token is that token
    bool newline_words_whole = false; // ... but only for words of newlines (llama.cpp's Gemma 4 rule)
    unknown_symbol unknown = unknown_symbol::single_bytes;
    bool fuse_unknown = false;
};

} // namespace strata
