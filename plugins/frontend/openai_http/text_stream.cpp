#include "text_stream.hpp"

#include <algorithm>

namespace strata::openai_http {

text_stream::text_stream(std::vector<std::string> stops) : stops_(std::move(stops)) {
    for (const std::string &s : stops_) longest_stop_ = std::max(longest_stop_, s.size());
    text_.reserve(1024);
}

bool text_stream::push(std::string_view piece) {
    if (stopped_) return true;
    const size_t old_size = text_.size();
    text_.append(piece);
    if (longest_stop_ == 0) return false;
    // A match can only involve the new bytes, so start at most longest_stop_ - 1 bytes before them.
    const size_t from = old_size >= longest_stop_ ? old_size - longest_stop_ + 1 : 0;
    size_t first = std::string::npos;
    for (const std::string &s : stops_) first = std::min(first, text_.find(s, from));
    if (first != std::string::npos) {
        text_.resize(first);
        sent_ = std::min(sent_, first);
        stopped_ = true;
    }
    return stopped_;
}

std::string_view text_stream::take_ready() {
    size_t end = text_.size();
    if (!stopped_) {
        // Hold back the longest tail that could still grow into a stop string.
        for (const std::string &s : stops_) {
            for (size_t k = std::min(s.size() - 1, text_.size()); k > 0; --k) {
                if (text_.size() - k < end && text_.compare(text_.size() - k, k, s, 0, k) == 0) {
                    end = text_.size() - k;
                    break;
                }
            }
        }
        end = utf8_complete_prefix(std::string_view(text_).substr(0, end));
    }
    if (end <= sent_) return {};
    std::string_view out = std::string_view(text_).substr(sent_, end - sent_);
    sent_ = end;
    return out;
}

std::string_view text_stream::take_rest() {
    std::string_view out = std::string_view(text_).substr(std::min(sent_, text_.size()));
    sent_ = text_.size();
    return out;
}

size_t utf8_complete_prefix(std::string_view s) {
    // Look back at most 3 bytes for the lead byte of the last character.
    const size_t n = s.size();
    for (size_t back = 1; back <= 4 && back <= n; ++back) {
        const auto c = static_cast<unsigned char>(s[n - back]);
        if ((c & 0xC0) == 0x80) continue; // continuation byte
        size_t need = 1;
        if ((c & 0xE0) == 0xC0) need = 2;
        else if ((c & 0xF0) == 0xE0) need = 3;
        else if ((c & 0xF8) == 0xF0) need = 4;
        return back < need ? n - back : n;
    }
    return n; // only continuation bytes: invalid anyway, send them (the JSON writer replaces them)
}

} // namespace strata::openai_http
