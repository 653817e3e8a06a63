// Codepoints for the tokenizers: UTF-8 decoding that never fails (llama.cpp's rules), general-category flags
// (generated tables, unicode_data.cpp), and GPT-2's byte <-> character map used by byte-level BPE.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace strata::unicode {

// One general category per codepoint (the low byte), plus White_Space. These are llama.cpp's unicode_cpt_flags
// bits, so \p{N} means `number` and so on; unassigned codepoints are `undefined`.
enum flag : uint16_t {
    undefined = 0x0001,
    number = 0x0002,      // \p{N}
    letter = 0x0004,      // \p{L}
    separator = 0x0008,   // \p{Z}
    mark = 0x0010,        // \p{M}
    punctuation = 0x0020, // \p{P}
    symbol = 0x0040,      // \p{S}
    control = 0x0080,     // \p{C}
    category_mask = 0x00FF,
    whitespace = 0x0100, // \s: the White_Space property
};

inline constexpr uint32_t max_codepoint = 0x10FFFF;
inline constexpr uint32_t replacement_character = 0xFFFD;

// Flags of a codepoint; anything above U+10FFFF is `undefined`.
uint16_t flags(uint32_t cpt);

// Byte length of the UTF-8 sequence that starts with `first` (1 for a stray continuation byte).
inline size_t utf8_length(unsigned char first) {
    constexpr uint8_t lookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lookup[first >> 4];
}

// Decodes UTF-8 the way llama.cpp does (unicode_cpts_from_utf8): an invalid or truncated sequence yields U+FFFD
// and consumes exactly one byte; overlong forms and surrogates are decoded as written. A 4-byte form above
// U+10FFFF also becomes U+FFFD (llama.cpp would fail to re-encode it). Appends to `out`.
void decode_utf8(std::string_view text, std::vector<uint32_t> &out);

// Appends the UTF-8 form of a codepoint (<= U+10FFFF; surrogates are written as 3 bytes, as llama.cpp does).
void append_utf8(std::string &out, uint32_t cpt);

// Unicode Normalization Form C (ICU's normalizer), as Hugging Face's NFC normalizer applies it; invalid UTF-8
// becomes U+FFFD first.
std::string nfc(std::string_view text);

// True for the CJK ideograph blocks llama.cpp's Kimi-K2 splitter treats as \p{Han}.
bool is_han(uint32_t cpt);

// GPT-2's byte-level alphabet: every byte has a printable character (0x21..0x7E, 0xA1..0xAC and 0xAE..0xFF stand
// for themselves, the other 68 bytes for U+0100 onwards in byte order). Returns that character's UTF-8 bytes.
std::string_view byte_to_text(uint8_t byte);
// The byte a character of that alphabet stands for, or -1.
int text_to_byte(uint32_t cpt);

} // namespace strata::unicode
