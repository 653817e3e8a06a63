// Strict incremental UTF-8 decoding, one byte at a time, for the grammar matcher: a token may end in the middle of a
// character, so the decoder's state (the bits so far and what the next byte may be) is carried to the next token.
// Strict means what RFC 3629 allows and nothing else: no overlong forms, no UTF-16 surrogates (U+D800..DFFF), nothing
// above U+10FFFF. So every valid prefix of a character can complete to one contiguous range of code points, which
// completion_range() returns; the matcher needs that range to decide whether a token ending mid-character may come.
#pragma once

#include <cstdint>
#include <string>

namespace strata::grammar {

struct utf8_decoder {
    uint32_t value = 0;   // bits of the character so far
    uint8_t remaining = 0; // continuation bytes still to come; 0 between characters
    uint8_t lo = 0x80;     // the next continuation byte must lie in [lo, hi]
    uint8_t hi = 0xBF;

    enum result : uint8_t { invalid, partial, complete };

    bool in_character() const { return remaining != 0; }

    // Feeds one byte. On `complete` the character is `value` (and the decoder is between characters again); on
    // `invalid` the decoder is left unchanged.
    result feed(uint8_t b) {
        if (remaining == 0) {
            if (b < 0x80) {
                value = b;
                return complete;
            }
            uint8_t next_lo = 0x80, next_hi = 0xBF;
            if (b >= 0xC2 && b <= 0xDF) {
                value = b & 0x1Fu;
                remaining = 1;
            } else if (b >= 0xE0 && b <= 0xEF) {
                value = b & 0x0Fu;
                remaining = 2;
                if (b == 0xE0) next_lo = 0xA0; // overlong below U+0800
                if (b == 0xED) next_hi = 0x9F; // surrogates
            } else if (b >= 0xF0 && b <= 0xF4) {
                value = b & 0x07u;
                remaining = 3;
                if (b == 0xF0) next_lo = 0x90; // overlong below U+10000
                if (b == 0xF4) next_hi = 0x8F; // above U+10FFFF
            } else {
                return invalid; // 0x80..0xC1 (continuation or overlong lead), 0xF5..0xFF
            }
            lo = next_lo;
            hi = next_hi;
            return partial;
        }
        if (b < lo || b > hi) return invalid;
        value = (value << 6) | (b & 0x3Fu);
        lo = 0x80;
        hi = 0xBF;
        return --remaining == 0 ? complete : partial;
    }

    // While in a character: the code points it can still complete to, [first, last].
    void completion_range(uint32_t &first, uint32_t &last) const {
        const unsigned rest = 6u * (remaining - 1u); // bits after the next continuation byte
        const uint32_t base = value << (6u * remaining);
        first = base | (static_cast<uint32_t>(lo & 0x3Fu) << rest);
        last = base | (static_cast<uint32_t>(hi & 0x3Fu) << rest) | ((1u << rest) - 1u);
    }

    friend bool operator==(const utf8_decoder &, const utf8_decoder &) = default;
};

// Appends code point cp (at most U+10FFFF) as UTF-8.
inline void append_utf8(std::string &out, uint32_t cp) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

} // namespace strata::grammar
