#include "tokenizer/unicode.hpp"

#include <algorithm>
#include <array>
#include <limits>

#include <unicode/unorm2.h>
#include <unicode/ustring.h>

#include "common/error.hpp"
#include "tokenizer/unicode_data.hpp"

namespace strata::unicode {

namespace {

// One uint16_t per codepoint (2.2 MB), built once: the pre-tokenizers look up every codepoint of every prompt.
const std::vector<uint16_t> &flag_table() {
    static const std::vector<uint16_t> table = [] {
        std::vector<uint16_t> t(max_codepoint + 1, undefined);
        for (size_t i = 0; i < n_category_ranges; ++i) {
            const uint32_t end = i + 1 < n_category_ranges ? category_ranges[i + 1].start : max_codepoint + 1;
            std::fill(t.begin() + category_ranges[i].start, t.begin() + end, category_ranges[i].flags);
        }
        for (size_t i = 0; i < n_white_space; ++i) t[white_space[i]] |= whitespace;
        return t;
    }();
    return table;
}

struct byte_alphabet {
    std::array<std::string, 256> text;      // byte -> UTF-8 of its character
    std::array<int16_t, 0x144> byte_of{};   // character (< U+0144) -> byte, -1 when none
};

const byte_alphabet &alphabet() {
    static const byte_alphabet a = [] {
        byte_alphabet r;
        r.byte_of.fill(-1);
        uint32_t next = 0x100;
        for (int b = 0; b < 256; ++b) {
            const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
            const uint32_t cpt = printable ? static_cast<uint32_t>(b) : next++;
            append_utf8(r.text[static_cast<size_t>(b)], cpt);
            r.byte_of[cpt] = static_cast<int16_t>(b);
        }
        return r;
    }();
    return a;
}

bool is_continuation(unsigned char c) { return (c & 0xC0) == 0x80; }

} // namespace

uint16_t flags(uint32_t cpt) { return cpt <= max_codepoint ? flag_table()[cpt] : uint16_t{undefined}; }

void decode_utf8(std::string_view text, std::vector<uint32_t> &out) {
    const auto *s = reinterpret_cast<const unsigned char *>(text.data());
    const size_t n = text.size();
    out.reserve(out.size() + n);
    for (size_t i = 0; i < n;) {
        const unsigned char c = s[i];
        if (c < 0x80) {
            out.push_back(c);
            ++i;
            continue;
        }
        size_t len = 0;
        uint32_t cpt = 0;
        if ((c & 0xE0) == 0xC0) {
            len = 2, cpt = c & 0x1Fu;
        } else if ((c & 0xF0) == 0xE0) {
            len = 3, cpt = c & 0x0Fu;
        } else if ((c & 0xF8) == 0xF0) {
            len = 4, cpt = c & 0x07u;
        }
        bool ok = len != 0 && i + len <= n;
        for (size_t k = 1; ok && k < len; ++k) {
            ok = is_continuation(s[i + k]);
            cpt = (cpt << 6) | (s[i + k] & 0x3Fu);
        }
        if (ok && cpt <= max_codepoint) {
            out.push_back(cpt);
            i += len;
        } else {
            out.push_back(replacement_character);
            ++i;
        }
    }
}

void append_utf8(std::string &out, uint32_t cpt) {
    if (cpt < 0x80) {
        out += static_cast<char>(cpt);
    } else if (cpt < 0x800) {
        out += static_cast<char>(0xC0 | (cpt >> 6));
        out += static_cast<char>(0x80 | (cpt & 0x3F));
    } else if (cpt < 0x10000) {
        out += static_cast<char>(0xE0 | (cpt >> 12));
        out += static_cast<char>(0x80 | ((cpt >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cpt & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | ((cpt >> 18) & 0x07));
        out += static_cast<char>(0x80 | ((cpt >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cpt >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cpt & 0x3F));
    }
}

std::string nfc(std::string_view text) {
    // Fast path: ASCII is always in NFC.
    if (std::all_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; }))
        return std::string(text);
    UErrorCode status = U_ZERO_ERROR;
    const UNormalizer2 *normalizer = unorm2_getNFCInstance(&status);
    if (U_FAILURE(status)) fail("unicode: ICU has no NFC normalizer: {}", u_errorName(status));
    if (text.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max() / 2))
        fail("unicode: a text of {} bytes is too long to normalize", text.size());
    const auto n = static_cast<int32_t>(text.size());
    std::u16string utf16(static_cast<size_t>(n), u'\0'); // UTF-16 never needs more units than UTF-8 has bytes
    int32_t len16 = 0;
    u_strFromUTF8WithSub(utf16.data(), n, &len16, text.data(), n, 0xFFFD, nullptr, &status);
    if (U_FAILURE(status)) fail("unicode: cannot read the text as UTF-8: {}", u_errorName(status));
    std::u16string normalized(static_cast<size_t>(len16) * 3 + 16, u'\0');
    const int32_t len = unorm2_normalize(normalizer, utf16.data(), len16, normalized.data(),
                                         static_cast<int32_t>(normalized.size()), &status);
    if (U_FAILURE(status)) fail("unicode: NFC normalization failed: {}", u_errorName(status));
    std::string out(static_cast<size_t>(len) * 3, '\0');
    int32_t len8 = 0;
    u_strToUTF8(out.data(), static_cast<int32_t>(out.size()), &len8, normalized.data(), len, &status);
    if (U_FAILURE(status)) fail("unicode: cannot write the normalized text: {}", u_errorName(status));
    out.resize(static_cast<size_t>(len8));
    return out;
}

bool is_han(uint32_t cpt) {
    return (cpt >= 0x4E00 && cpt <= 0x9FFF) || (cpt >= 0x3400 && cpt <= 0x4DBF) || (cpt >= 0x20000 && cpt <= 0x2A6DF) ||
           (cpt >= 0x2A700 && cpt <= 0x2B73F) || (cpt >= 0x2B740 && cpt <= 0x2B81F) ||
           (cpt >= 0x2B820 && cpt <= 0x2CEAF) || (cpt >= 0x2CEB0 && cpt <= 0x2EBEF) ||
           (cpt >= 0xF900 && cpt <= 0xFAFF) || (cpt >= 0x2F800 && cpt <= 0x2FA1F);
}

std::string_view byte_to_text(uint8_t byte) { return alphabet().text[byte]; }

int text_to_byte(uint32_t cpt) { return cpt < alphabet().byte_of.size() ? alphabet().byte_of[cpt] : -1; }

} // namespace strata::unicode
