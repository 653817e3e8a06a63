// A set of Unicode code points as sorted, disjoint ranges: what one terminal of a grammar matches ("a", [a-z0-9],
// [^"\\], .). Negation is applied when the class is built, so matching is one bitmap test for ASCII and a binary search
// otherwise.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace strata::grammar {

inline constexpr uint32_t max_code_point = 0x10FFFF;

struct code_point_range {
    uint32_t first;
    uint32_t last; // inclusive
    friend bool operator==(const code_point_range &, const code_point_range &) = default;
};

class char_class {
  public:
    // How a class relates to a range of code points.
    enum relation : uint8_t { none, some, all };

    char_class() = default;
    // Any ranges (overlapping, unsorted); `negated` complements them within [0, U+10FFFF].
    char_class(std::vector<code_point_range> ranges, bool negated);

    bool contains(uint32_t cp) const {
        if (cp < 128) return (ascii_[cp >> 6] >> (cp & 63)) & 1u;
        return contains_slow(cp);
    }
    relation relation_to(uint32_t first, uint32_t last) const;
    bool empty() const { return ranges_.empty(); }

    const std::vector<code_point_range> &ranges() const { return ranges_; }
    // GBNF text for the class: "x" for one printable character, else [...] with escapes.
    std::string to_gbnf() const;

    friend bool operator==(const char_class &a, const char_class &b) { return a.ranges_ == b.ranges_; }

  private:
    bool contains_slow(uint32_t cp) const;

    std::vector<code_point_range> ranges_; // sorted, disjoint, not adjacent
    uint64_t ascii_[2] = {0, 0};
};

} // namespace strata::grammar
