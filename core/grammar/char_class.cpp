#include "grammar/char_class.hpp"

#include "grammar/utf8_decoder.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace strata::grammar {

char_class::char_class(std::vector<code_point_range> ranges, bool negated) {
    std::sort(ranges.begin(), ranges.end(), [](const code_point_range &a, const code_point_range &b) {
        return a.first != b.first ? a.first < b.first : a.last < b.last;
    });
    for (const code_point_range &r : ranges) {
        if (r.first > r.last) continue;
        if (!ranges_.empty() && r.first <= ranges_.back().last + 1) {
            ranges_.back().last = std::max(ranges_.back().last, r.last);
        } else {
            ranges_.push_back(r);
        }
    }
    if (negated) {
        std::vector<code_point_range> complement;
        uint32_t next = 0;
        for (const code_point_range &r : ranges_) {
            if (r.first > next) complement.push_back({next, r.first - 1});
            next = r.last + 1;
        }
        if (next <= max_code_point) complement.push_back({next, max_code_point});
        ranges_ = std::move(complement);
    }
    for (const code_point_range &r : ranges_) {
        for (uint32_t c = r.first; c <= r.last && c < 128; ++c) ascii_[c >> 6] |= uint64_t{1} << (c & 63);
    }
}

bool char_class::contains_slow(uint32_t cp) const {
    // The first range that ends at or after cp.
    const auto it = std::lower_bound(ranges_.begin(), ranges_.end(), cp,
                                     [](const code_point_range &r, uint32_t c) { return r.last < c; });
    return it != ranges_.end() && it->first <= cp;
}

char_class::relation char_class::relation_to(uint32_t first, uint32_t last) const {
    const auto it = std::lower_bound(ranges_.begin(), ranges_.end(), first,
                                     [](const code_point_range &r, uint32_t c) { return r.last < c; });
    if (it == ranges_.end() || it->first > last) return none;
    return it->first <= first && it->last >= last ? all : some;
}

namespace {

void append_class_char(std::string &out, uint32_t c) {
    switch (c) {
    case '\n': out += "\\n"; return;
    case '\r': out += "\\r"; return;
    case '\t': out += "\\t"; return;
    case '\\': out += "\\\\"; return;
    case ']': out += "\\]"; return;
    case '[': out += "\\["; return;
    case '-': out += "\\-"; return;
    case '^': out += "\\x5E"; return; // a literal ^ first in a class would negate it
    case '"': out += "\\\""; return;
    default: break;
    }
    if (c < 0x20 || c == 0x7F) {
        out += fmt::format("\\x{:02X}", c);
    } else if (c >= 0xD800 && c <= 0xDFFF) {
        out += fmt::format("\\u{:04X}", c); // not encodable as UTF-8
    } else {
        append_utf8(out, c);
    }
}

} // namespace

std::string char_class::to_gbnf() const {
    if (ranges_.size() == 1 && ranges_[0].first == 0 && ranges_[0].last == max_code_point) return ".";
    if (ranges_.empty()) return "[^\\x00-\\U0010FFFF]"; // matches nothing
    std::string out = "[";
    for (const code_point_range &r : ranges_) {
        append_class_char(out, r.first);
        if (r.last != r.first) {
            if (r.last != r.first + 1) out += '-';
            append_class_char(out, r.last);
        }
    }
    return out + "]";
}

} // namespace strata::grammar
