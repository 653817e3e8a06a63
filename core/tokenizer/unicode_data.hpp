// The Unicode tables the pre-tokenizers read (generated into unicode_data.cpp by tools/unicode/gen_unicode_data.py).
#pragma once

#include <cstddef>
#include <cstdint>

namespace strata::unicode {

// General-category flag (unicode::flag) of every codepoint from `start` up to the next range's start.
struct category_range {
    uint32_t start;
    uint8_t flags;
};

extern const category_range category_ranges[];
extern const size_t n_category_ranges;
// Unicode's White_Space property, ascending.
extern const uint32_t white_space[];
extern const size_t n_white_space;
// The Unicode version the tables were generated from.
extern const char unicode_version[];

} // namespace strata::unicode
