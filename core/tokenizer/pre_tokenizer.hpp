// Byte-level BPE pre-tokenizers: the text is cut into words by a list of regexes, chosen by the GGUF key
// tokenizer.ggml.pre exactly as llama.cpp chooses them (llm_tokenizer_bpe, llama_vocab::impl::load), so the same
// file gives the same words. Regexes that llama.cpp runs with a hand-written splitter use the same splitters here
// (pre_tokenizer_custom.cpp); the others run in PCRE2 over llama.cpp's "collapsed" text (every non-ASCII codepoint
// replaced by a code for its category) or over the codepoints themselves (regex_split.hpp).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/regex_split.hpp"
#include "tokenizer/text_rules.hpp"

namespace strata {

// What a tokenizer.ggml.pre name changes besides its regexes (llama.cpp's flags for that name).
enum pre_tokenizer_flag : uint8_t {
    pre_ignore_merges = 1,      // a word that is a whole token is emitted as is, before any merge
    pre_add_bos = 2,            // BOS is added by default (the GGUF's add_bos_token key still wins)
    pre_no_bos = 8,             // the vocab has no BOS token (ChatGLM)
    pre_escape_whitespace = 16, // spaces become U+2581 before splitting (SentencePiece-style BPE)
    pre_raw_bytes = 32,         // words are matched as raw UTF-8, not through GPT-2's byte alphabet
    pre_newline_words_whole = 64, // a word of newlines only that is a token is that token (Gemma 4)
};

struct pre_tokenizer_spec {
    std::string_view name; // the tokenizer.ggml.pre value
    std::span<const std::string_view> regexes;
    uint8_t flags = 0;
};

// The spec for a tokenizer.ggml.pre value; nullopt when llama.cpp does not know the name either.
std::optional<pre_tokenizer_spec> find_pre_tokenizer(std::string_view name);
// Every known name, for error messages and tests.
std::vector<std::string_view> pre_tokenizer_names();

// The rules a tokenizer.ggml.pre name stands for in llama.cpp: its regexes (llama.cpp's dialect), GPT-2's byte
// alphabet or raw bytes, ignore_merges, and U+2581 for spaces where the name asks for it.
bpe_rules rules_for(const pre_tokenizer_spec &spec);

// The words of a text, as codepoints: word i is cpts[begin_i, begin_i + lengths[i]) with begin_i the sum of the
// lengths before it. Reused across calls to avoid reallocating.
struct pre_split_result {
    std::vector<uint32_t> cpts;
    std::vector<size_t> lengths;
    // scratch
    std::vector<uint32_t> collapsed, wide;
    std::vector<size_t> next;
    std::vector<split_regex::segment> segments;
    regex_scratch scratch;
};

class pre_tokenizer {
  public:
    // Compiles the rules' regexes once; `name` is for messages. Throws strata::error when one cannot be compiled.
    pre_tokenizer(std::span<const split_rule> rules, std::string name);

    // Splits UTF-8 text (invalid bytes become U+FFFD) into words.
    void split(std::string_view text, pre_split_result &out) const;

    const std::string &name() const { return name_; }

  private:
    using custom_splitter = void (*)(std::span<const uint32_t> cpts, std::span<const size_t> pieces,
                                     std::vector<size_t> &out);
    enum class subject { codepoints, collapsed, wide };
    struct step {
        custom_splitter custom = nullptr; // when set, `regex` is unused
        std::optional<split_regex> regex;
        subject on = subject::codepoints;
        split_rule rule;
    };
    std::string name_;
    std::vector<step> steps_;
    bool need_collapsed_ = false, need_wide_ = false;
};

// llama.cpp's hand-written splitters, keyed by the exact regex text they stand for (pre_tokenizer_custom.cpp).
// Returns nullptr when the regex has none.
using pre_custom_splitter = void (*)(std::span<const uint32_t> cpts, std::span<const size_t> pieces,
                                     std::vector<size_t> &out);
pre_custom_splitter find_custom_splitter(std::string_view regex);

} // namespace strata
