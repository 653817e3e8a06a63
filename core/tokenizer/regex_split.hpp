// One pre-tokenizer regex, compiled once with PCRE2 (32-bit code units, no UTF, no UCP) and run over arrays of
// codepoints, with std::regex_iterator's rules for splitting: every match and every gap between matches becomes a
// piece, and after an empty match the search retries at the same place for a non-empty one before stepping on.
// That is how llama.cpp runs the regexes it has no hand-written splitter for; PCRE2 backtracks on the heap, so a
// long run of one character cannot overflow the stack the way std::regex does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace strata {

class split_regex {
  public:
    // `pattern` in code units (codepoints, or collapsed category codes); `name` is for error messages.
    // Throws strata::error when PCRE2 refuses the pattern.
    split_regex(std::u32string pattern, std::string name);
    ~split_regex();
    split_regex(split_regex &&) noexcept;
    split_regex &operator=(split_regex &&) noexcept;

    // Splits each piece of `subject` (consecutive lengths in `pieces`, summing to subject.size()) and appends the
    // lengths of the new pieces to `out` (an empty match gives a 0-length piece, as in llama.cpp).
    // Throws strata::error when PCRE2 gives up (its match limit), naming the regex.
    void split(std::span<const uint32_t> subject, std::span<const size_t> pieces, std::vector<size_t> &out) const;

    const std::string &name() const { return name_; }

  private:
    struct compiled;
    std::unique_ptr<compiled> re_;
    std::string name_;
};

} // namespace strata
