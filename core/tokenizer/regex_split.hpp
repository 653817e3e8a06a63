// One pre-tokenizer regex, compiled once with PCRE2 (32-bit code units) and run over arrays of codepoints, with
// std::regex_iterator's rules for finding matches: after an empty match the search retries at the same place for a
// non-empty one before stepping on. Two dialects: without UTF and UCP (llama.cpp's way of running its regexes over
// a collapsed text, ASCII classes) and with them (Hugging Face tokenizers' Unicode semantics). PCRE2 backtracks on
// the heap, so a long run of one character cannot overflow the stack the way std::regex does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace strata {

// What matching needs besides the pattern (PCRE2's match data, limits and JIT stack): made once per text and
// reused for every regex and piece of it, so splitting allocates nothing per word.
class regex_scratch {
  public:
    regex_scratch();
    ~regex_scratch();
    regex_scratch(regex_scratch &&) noexcept;
    regex_scratch &operator=(regex_scratch &&) noexcept;
    struct state;
    state &get() { return *s_; }

  private:
    std::unique_ptr<state> s_;
};

class split_regex {
  public:
    // `pattern` in code units (codepoints, or collapsed category codes); `unicode`: UTF + UCP (\p{..}, case
    // folding and \s over all of Unicode). `name` is for error messages. Throws strata::error when PCRE2 refuses it.
    split_regex(std::u32string pattern, bool unicode, std::string name);
    ~split_regex();
    split_regex(split_regex &&) noexcept;
    split_regex &operator=(split_regex &&) noexcept;

    // One stretch of a piece: a match (possibly empty) or the text between two matches.
    struct segment {
        size_t length;
        bool match;
    };
    // The matches of `piece` and the stretches between them, in order (gaps are never empty). Throws strata::error
    // when PCRE2 gives up (its match limit), naming the regex.
    void segments(std::span<const uint32_t> piece, regex_scratch &scratch, std::vector<segment> &out) const;

    const std::string &name() const { return name_; }

  private:
    struct compiled;
    std::unique_ptr<compiled> re_;
    std::string name_;
};

} // namespace strata
