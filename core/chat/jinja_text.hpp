// Text and number rules of the Jinja engine. The reference renderer (@huggingface/jinja) is JavaScript, so strings
// behave like JavaScript strings where it shows in output: whitespace is JavaScript's \s set, lengths and indexes count
// UTF-16 code units, case mapping is Unicode's, and numbers print the way Number.prototype.toString prints them.
// Strings are stored as UTF-8; every string that enters the engine is made valid UTF-8 first (sanitize_utf8).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace strata::chat::jinja {

// Valid UTF-8: every ill-formed sequence becomes U+FFFD (one per maximal ill-formed subpart, as a browser decodes).
std::string sanitize_utf8(std::string_view s);
bool is_valid_utf8(std::string_view s);

// The code point at s[i] (s valid UTF-8), advancing i past it; U+FFFD for a stray byte.
char32_t next_code_point(std::string_view s, size_t &i);
void append_utf8(std::string &out, char32_t c);
size_t code_point_count(std::string_view s);

// JavaScript's view of a string: length and index in UTF-16 code units. An index that lands inside a surrogate pair
// gives U+FFFD (what a lone surrogate becomes when JavaScript writes UTF-8).
size_t utf16_length(std::string_view s);
std::optional<std::string> utf16_unit_at(std::string_view s, int64_t index);
// Orders like JavaScript's < on strings (UTF-16 code units).
int compare_utf16(std::string_view a, std::string_view b);

// JavaScript's whitespace (the regex class \s, String.prototype.trim).
bool is_js_space(char32_t c);
// A letter in Unicode (what Python's str.isalpha accepts, near enough).
bool is_letter(char32_t c);
std::string_view js_trim(std::string_view s);
std::string_view js_trim_start(std::string_view s);
std::string_view js_trim_end(std::string_view s);
// The length of the run of JavaScript whitespace starting at s[i].
size_t js_space_run(std::string_view s, size_t i);

// Unicode case mapping as String.prototype.toUpperCase / toLowerCase do it (full mapping: "ß" -> "SS").
std::string to_upper(std::string_view s);
std::string to_lower(std::string_view s);
// @huggingface/jinja's title(): the first ASCII word character after a word boundary (/\b\w/) upper-cased.
std::string title_case(std::string_view s);
// @huggingface/jinja's capitalize(): the first character upper-cased, the rest unchanged.
std::string capitalize_first(std::string_view s);

// Number.prototype.toString(): "1", "0.1", "1e+21", "1.5e-7", "NaN", "Infinity".
std::string js_number_text(double x);
// How a Jinja float prints: integral values keep ".0" ("1.0", "-0.0"), others as js_number_text.
std::string float_text(double x);
// parseInt(s, 10) and parseFloat(s); nullopt where JavaScript gives NaN.
std::optional<double> js_parse_int(std::string_view s);
std::optional<double> js_parse_float(std::string_view s);
// Number(s): the whole string must be a number ("" and whitespace give 0); NaN otherwise.
double js_string_to_number(std::string_view s);

// s as a JSON string literal the way JSON.stringify writes it; with ascii_only, every UTF-16 unit from U+007F up as
// \uXXXX.
void append_json_string(std::string &out, std::string_view s, bool ascii_only);

} // namespace strata::chat::jinja
