// The text of one generation as tokens arrive: applies stop strings (the text ends before the first match) and
// releases only bytes that are safe to send now: never part of a UTF-8 character still being completed, never a
// possible beginning of a stop string. Pure; one per choice; not thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace strata::openai_http {

class text_stream {
  public:
    explicit text_stream(std::vector<std::string> stops = {});

    // Appends one token's bytes. Returns true when a stop string has now matched (later pushes are ignored).
    bool push(std::string_view piece);
    bool stopped() const { return stopped_; }

    // Bytes ready to send that were not taken before. The view is valid until the next push.
    std::string_view take_ready();
    // Everything not taken yet, at the end of the generation.
    std::string_view take_rest();

    const std::string &text() const { return text_; }

  private:
    std::vector<std::string> stops_;
    size_t longest_stop_ = 0;
    std::string text_;
    size_t sent_ = 0;
    bool stopped_ = false;
};

// Length of the longest prefix of `s` that does not end inside an incomplete UTF-8 sequence.
size_t utf8_complete_prefix(std::string_view s);

} // namespace strata::openai_http
