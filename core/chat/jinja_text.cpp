// Text and number rules of the Jinja engine: UTF-8 hygiene, JavaScript's string semantics, number text.
#include "chat/jinja_text.hpp"

#include <fmt/format.h>

#include <charconv>
#include <clocale>
#include <cmath>
#include <cstdlib>
#include <cwctype>
#include <locale.h>

namespace strata::chat::jinja {

namespace {

constexpr char32_t replacement_char = 0xFFFD;

// The C.UTF-8 locale for towupper_l / towlower_l (glibc builds it in); null when missing: ASCII-only case mapping.
locale_t utf8_ctype() {
    static const locale_t loc = newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(nullptr));
    return loc;
}

// The "C" locale for strtod_l, so a process-wide setlocale cannot change how "1.5" reads.
locale_t c_numeric() {
    static const locale_t loc = newlocale(LC_NUMERIC_MASK, "C", static_cast<locale_t>(nullptr));
    return loc;
}

// A decimal number already checked to be [digits][.digits][e[+-]digits] (no sign, no hex, no inf).
double decimal_value(std::string_view digits) {
    const std::string text(digits);
    const locale_t loc = c_numeric();
    return loc ? strtod_l(text.c_str(), nullptr, loc) : std::strtod(text.c_str(), nullptr);
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// The length of the longest prefix of s that is a StrUnsignedDecimalLiteral without "Infinity" (0 when none).
size_t decimal_prefix(std::string_view s) {
    size_t i = 0;
    size_t int_digits = 0, frac_digits = 0;
    while (i < s.size() && is_digit(s[i])) ++i, ++int_digits;
    size_t end = int_digits ? i : 0;
    if (i < s.size() && s[i] == '.') {
        size_t j = i + 1;
        while (j < s.size() && is_digit(s[j])) ++j, ++frac_digits;
        if (int_digits || frac_digits) {
            i = j;
            end = j;
        }
    }
    if (!int_digits && !frac_digits) return 0;
    if (end < s.size() && (s[end] == 'e' || s[end] == 'E')) {
        size_t j = end + 1;
        if (j < s.size() && (s[j] == '+' || s[j] == '-')) ++j;
        const size_t digits_start = j;
        while (j < s.size() && is_digit(s[j])) ++j;
        if (j > digits_start) end = j;
    }
    return end;
}

bool is_ascii_word(unsigned char c) { return std::isalnum(c) || c == '_'; }

// The full (one-to-many) upper-case mappings JavaScript applies that towupper cannot express.
const char *special_upper(char32_t c) {
    switch (c) {
    case 0x00DF: return "SS";
    case 0x0149: return "\u02BCN";
    case 0x01F0: return "J\u030C";
    case 0x0390: return "\u0399\u0308\u0301";
    case 0x03B0: return "\u03A5\u0308\u0301";
    case 0x0587: return "\u0535\u0552";
    case 0x1E96: return "H\u0331";
    case 0x1E97: return "T\u0308";
    case 0x1E98: return "W\u030A";
    case 0x1E99: return "Y\u030A";
    case 0x1E9A: return "A\u02BE";
    case 0xFB00: return "FF";
    case 0xFB01: return "FI";
    case 0xFB02: return "FL";
    case 0xFB03: return "FFI";
    case 0xFB04: return "FFL";
    case 0xFB05: return "ST";
    case 0xFB06: return "ST";
    default: return nullptr;
    }
}

char32_t map_case(char32_t c, bool upper) {
    if (c < 0x80)
        return static_cast<char32_t>(upper ? std::toupper(static_cast<int>(c)) : std::tolower(static_cast<int>(c)));
    const locale_t loc = utf8_ctype();
    if (!loc) return c;
    const wint_t mapped = upper ? towupper_l(static_cast<wint_t>(c), loc) : towlower_l(static_cast<wint_t>(c), loc);
    return static_cast<char32_t>(mapped);
}

} // namespace

namespace {

// At s[i], a byte >= 0x80: the length of the well-formed UTF-8 sequence there (2..4), or 0 with `bad` set to the
// bytes a malformed one spans (up to the first byte that cannot continue it; at least 1), which sanitize_utf8
// replaces by one U+FFFD.
size_t utf8_sequence_at(std::string_view s, size_t i, size_t &bad) {
    const auto b = static_cast<unsigned char>(s[i]);
    size_t need = 0;
    unsigned char lower = 0x80, upper = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) {
        need = 1;
    } else if (b >= 0xE0 && b <= 0xEF) {
        need = 2;
        if (b == 0xE0) lower = 0xA0;
        if (b == 0xED) upper = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
        need = 3;
        if (b == 0xF0) lower = 0x90;
        if (b == 0xF4) upper = 0x8F;
    } else {
        bad = 1;
        return 0;
    }
    for (size_t k = 1; k <= need; ++k) {
        const size_t j = i + k;
        const auto c = j < s.size() ? static_cast<unsigned char>(s[j]) : 0;
        if (j >= s.size() || c < (k == 1 ? lower : 0x80) || c > (k == 1 ? upper : 0xBF)) {
            bad = k;
            return 0;
        }
    }
    return need + 1;
}

} // namespace

std::string sanitize_utf8(std::string_view s) {
    if (is_valid_utf8(s)) return std::string(s);
    std::string out;
    out.reserve(s.size() + 8);
    for (size_t i = 0; i < s.size();) {
        if (static_cast<unsigned char>(s[i]) < 0x80) {
            out += s[i++];
            continue;
        }
        size_t bad = 0;
        if (const size_t n = utf8_sequence_at(s, i, bad)) {
            out.append(s.substr(i, n));
            i += n;
        } else {
            append_utf8(out, replacement_char);
            i += bad;
        }
    }
    return out;
}

bool is_valid_utf8(std::string_view s) {
    for (size_t i = 0; i < s.size();) {
        if (static_cast<unsigned char>(s[i]) < 0x80) {
            ++i;
            continue;
        }
        size_t bad = 0;
        const size_t n = utf8_sequence_at(s, i, bad);
        if (n == 0) return false;
        i += n;
    }
    return true;
}

char32_t next_code_point(std::string_view s, size_t &i) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) {
        ++i;
        return b;
    }
    int need = b >= 0xF0 ? 3 : b >= 0xE0 ? 2 : b >= 0xC0 ? 1 : -1;
    if (need < 0 || i + static_cast<size_t>(need) >= s.size()) {
        ++i;
        return replacement_char;
    }
    char32_t c = b & (need == 1 ? 0x1F : need == 2 ? 0x0F : 0x07);
    for (int k = 1; k <= need; ++k) {
        const auto cont = static_cast<unsigned char>(s[i + static_cast<size_t>(k)]);
        if ((cont & 0xC0) != 0x80) {
            ++i;
            return replacement_char;
        }
        c = (c << 6) | (cont & 0x3F);
    }
    i += static_cast<size_t>(need) + 1;
    return c;
}

void append_utf8(std::string &out, char32_t c) {
    if (c < 0x80) {
        out += static_cast<char>(c);
    } else if (c < 0x800) {
        out += static_cast<char>(0xC0 | (c >> 6));
        out += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
        if (c >= 0xD800 && c <= 0xDFFF) c = replacement_char;
        out += static_cast<char>(0xE0 | (c >> 12));
        out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x110000) {
        out += static_cast<char>(0xF0 | (c >> 18));
        out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (c & 0x3F));
    } else {
        append_utf8(out, replacement_char);
    }
}

size_t code_point_count(std::string_view s) {
    size_t n = 0;
    for (const char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    return n;
}

size_t utf16_length(std::string_view s) {
    size_t n = 0;
    for (const char c : s) {
        const auto b = static_cast<unsigned char>(c);
        if ((b & 0xC0) != 0x80) n += b >= 0xF0 ? 2 : 1;
    }
    return n;
}

std::optional<std::string> utf16_unit_at(std::string_view s, int64_t index) {
    const auto length = static_cast<int64_t>(utf16_length(s));
    if (index < 0) index += length;
    if (index < 0 || index >= length) return std::nullopt;
    int64_t unit = 0;
    size_t i = 0;
    while (i < s.size()) {
        const size_t start = i;
        const char32_t c = next_code_point(s, i);
        const int64_t width = c >= 0x10000 ? 2 : 1;
        if (index < unit + width) {
            if (width == 2) return std::string("\xEF\xBF\xBD"); // half of a surrogate pair
            return std::string(s.substr(start, i - start));
        }
        unit += width;
    }
    return std::nullopt;
}

int compare_utf16(std::string_view a, std::string_view b) {
    size_t i = 0, j = 0;
    while (i < a.size() && j < b.size()) {
        const char32_t ca = next_code_point(a, i), cb = next_code_point(b, j);
        if (ca == cb) continue;
        // A supplementary character's first UTF-16 unit is a high surrogate (0xD800..0xDBFF).
        const auto unit = [](char32_t c) { return c >= 0x10000 ? 0xD800 + ((c - 0x10000) >> 10) : c; };
        const auto ua = unit(ca), ub = unit(cb);
        if (ua != ub) return ua < ub ? -1 : 1;
        return ca < cb ? -1 : 1; // same high surrogate: the low surrogates order as the code points do
    }
    if (i < a.size()) return 1;
    if (j < b.size()) return -1;
    return 0;
}

bool is_letter(char32_t c) {
    if (c < 0x80) return std::isalpha(static_cast<unsigned char>(c)) != 0;
    const locale_t loc = utf8_ctype();
    return loc && iswalpha_l(static_cast<wint_t>(c), loc);
}

bool is_js_space(char32_t c) {
    switch (c) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x20:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
    case 0xFEFF: return true;
    default: return c >= 0x2000 && c <= 0x200A;
    }
}

size_t js_space_run(std::string_view s, size_t i) {
    const size_t start = i;
    while (i < s.size()) {
        size_t next = i;
        if (!is_js_space(next_code_point(s, next))) break;
        i = next;
    }
    return i - start;
}

std::string_view js_trim_start(std::string_view s) { return s.substr(js_space_run(s, 0)); }

std::string_view js_trim_end(std::string_view s) {
    // Find the end of the last non-space code point.
    size_t i = 0, end = 0;
    while (i < s.size()) {
        const char32_t c = next_code_point(s, i);
        if (!is_js_space(c)) end = i;
    }
    return s.substr(0, end);
}

std::string_view js_trim(std::string_view s) { return js_trim_end(js_trim_start(s)); }

std::string to_upper(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    size_t i = 0;
    while (i < s.size()) {
        const auto b = static_cast<unsigned char>(s[i]);
        if (b < 0x80) {
            out += static_cast<char>(std::toupper(b));
            ++i;
            continue;
        }
        const char32_t c = next_code_point(s, i);
        if (const char *special = special_upper(c)) {
            out += special;
        } else {
            append_utf8(out, map_case(c, true));
        }
    }
    return out;
}

std::string to_lower(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    size_t i = 0;
    char32_t previous = 0;
    while (i < s.size()) {
        const auto b = static_cast<unsigned char>(s[i]);
        if (b < 0x80) {
            out += static_cast<char>(std::tolower(b));
            previous = b;
            ++i;
            continue;
        }
        const char32_t c = next_code_point(s, i);
        if (c == 0x0130) {
            out += "i\u0307";
        } else if (c == 0x03A3) {
            // Final sigma: after a letter and not before one.
            size_t next = i;
            const bool followed = next < s.size() && is_letter(next_code_point(s, next));
            append_utf8(out, previous && is_letter(previous) && !followed ? 0x03C2 : 0x03C3);
        } else {
            append_utf8(out, map_case(c, false));
        }
        previous = c;
    }
    return out;
}

std::string title_case(std::string_view s) {
    std::string out(s);
    for (size_t i = 0; i < out.size(); ++i) {
        const auto c = static_cast<unsigned char>(out[i]);
        if (is_ascii_word(c) && (i == 0 || !is_ascii_word(static_cast<unsigned char>(out[i - 1]))))
            out[i] = static_cast<char>(std::toupper(c));
    }
    return out;
}

std::string capitalize_first(std::string_view s) {
    if (s.empty()) return {};
    size_t i = 0;
    const char32_t first = next_code_point(s, i);
    if (first >= 0x10000) return std::string(s); // JavaScript upper-cases half a surrogate pair: no change
    std::string head;
    append_utf8(head, first);
    return to_upper(head) + std::string(s.substr(i));
}

std::string js_number_text(double x) {
    if (std::isnan(x)) return "NaN";
    if (x == 0) return "0";
    if (std::isinf(x)) return x < 0 ? "-Infinity" : "Infinity";
    std::string sign = x < 0 ? "-" : "";
    char buf[64];
    const auto result = std::to_chars(buf, buf + sizeof buf, std::fabs(x), std::chars_format::scientific);
    const std::string_view sci(buf, static_cast<size_t>(result.ptr - buf)); // "d.ddde+XX" or "de-XX"
    const size_t e = sci.find('e');
    std::string digits;
    for (const char c : sci.substr(0, e))
        if (c != '.') digits += c;
    int exponent = 0;
    const std::string_view exp_text = sci.substr(e + 1);
    std::from_chars(exp_text.data() + (exp_text[0] == '+' ? 1 : 0), exp_text.data() + exp_text.size(), exponent);
    const int k = static_cast<int>(digits.size());
    const int n = exponent + 1; // value = 0.digits * 10^n
    if (k <= n && n <= 21) return sign + digits + std::string(static_cast<size_t>(n - k), '0');
    if (0 < n && n <= 21)
        return sign + digits.substr(0, static_cast<size_t>(n)) + "." + digits.substr(static_cast<size_t>(n));
    if (-6 < n && n <= 0) return sign + "0." + std::string(static_cast<size_t>(-n), '0') + digits;
    const std::string exp_part = fmt::format("e{}{}", n - 1 >= 0 ? "+" : "-", std::abs(n - 1));
    if (k == 1) return sign + digits + exp_part;
    return sign + digits.substr(0, 1) + "." + digits.substr(1) + exp_part;
}

std::string float_text(double x) {
    if (x == 0 && std::signbit(x)) return "-0.0";
    if (std::isfinite(x) && std::fmod(x, 1.0) == 0) {
        if (std::fabs(x) >= 1e21) return js_number_text(x); // toFixed gives up on large values
        return fmt::format("{:.1f}", x);
    }
    return js_number_text(x);
}

std::optional<double> js_parse_int(std::string_view s) {
    s = js_trim_start(s);
    bool negative = false;
    if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
        negative = s[0] == '-';
        s.remove_prefix(1);
    }
    size_t n = 0;
    while (n < s.size() && is_digit(s[n])) ++n;
    if (n == 0) return std::nullopt;
    const double v = decimal_value(s.substr(0, n));
    return negative ? -v : v;
}

std::optional<double> js_parse_float(std::string_view s) {
    s = js_trim_start(s);
    bool negative = false;
    if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
        negative = s[0] == '-';
        s.remove_prefix(1);
    }
    double v;
    if (s.substr(0, 8) == "Infinity") {
        v = INFINITY;
    } else {
        const size_t n = decimal_prefix(s);
        if (n == 0) return std::nullopt;
        v = decimal_value(s.substr(0, n));
    }
    return negative ? -v : v;
}

double js_string_to_number(std::string_view s) {
    s = js_trim(s);
    if (s.empty()) return 0;
    if (s.size() > 2 && s[0] == '0') {
        const char p = static_cast<char>(std::tolower(static_cast<unsigned char>(s[1])));
        const int radix = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
        if (radix) {
            double v = 0;
            for (const char c : s.substr(2)) {
                int d;
                if (is_digit(c))
                    d = c - '0';
                else if (c >= 'a' && c <= 'f')
                    d = c - 'a' + 10;
                else if (c >= 'A' && c <= 'F')
                    d = c - 'A' + 10;
                else
                    return NAN;
                if (d >= radix) return NAN;
                v = v * radix + d;
            }
            return v;
        }
    }
    bool negative = false;
    if (s[0] == '+' || s[0] == '-') {
        negative = s[0] == '-';
        s.remove_prefix(1);
    }
    double v;
    if (s == "Infinity") {
        v = INFINITY;
    } else {
        if (decimal_prefix(s) != s.size()) return NAN;
        v = decimal_value(s);
    }
    return negative ? -v : v;
}

void append_json_string(std::string &out, std::string_view s, bool ascii_only) {
    static const char hex[] = "0123456789abcdef";
    const auto append_unit = [&out](unsigned unit) {
        out += "\\u";
        for (int shift = 12; shift >= 0; shift -= 4) out += hex[(unit >> shift) & 0xF];
    };
    out += '"';
    size_t i = 0;
    while (i < s.size()) {
        const auto b = static_cast<unsigned char>(s[i]);
        if (b >= 0x80 || (ascii_only && b == 0x7F)) {
            const size_t start = i;
            const char32_t c = next_code_point(s, i);
            if (!ascii_only) {
                out.append(s.substr(start, i - start));
            } else if (c >= 0x10000) {
                append_unit(0xD800 + ((c - 0x10000) >> 10));
                append_unit(0xDC00 + ((c - 0x10000) & 0x3FF));
            } else {
                append_unit(c);
            }
            continue;
        }
        ++i;
        switch (b) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        default:
            if (b < 0x20) {
                append_unit(b);
            } else {
                out += static_cast<char>(b);
            }
        }
    }
    out += '"';
}

} // namespace strata::chat::jinja
