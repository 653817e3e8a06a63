// Regular expressions -> GBNF, for JSON Schema's `pattern` (and vLLM's guided_regex later). The syntax is the
// ECMAScript subset that schemas use: literals, `.`, classes [a-z] [^...] with \d \w \s \D \W \S, escapes \t \n \r \f
// \v \0 \xHH \uHHHH \u{H...} (surrogate pairs combine), groups ( ) (?: ) (?<name> ), alternation |, quantifiers
// * + ? {n} {n,} {n,m} (lazy forms match the same strings), and the anchors ^ and $ at the start and end of a
// top-level alternative. Refused with a strata::error that says what and where (offset in the pattern):
// backreferences, lookaround, word boundaries \b \B, Unicode property escapes \p{...}, inline flags, and anything
// else a context-free grammar cannot express or this translator does not know.
#pragma once

#include <string>
#include <string_view>

namespace strata::grammar {

enum class regex_match {
    search, // JSON Schema `pattern`: the string must contain a match; ^ and $ anchor it at either end
    full,   // the whole text must match (guided_regex); ^ and $ are allowed and change nothing
};

// A GBNF expression (one parenthesized group) for the strings the pattern matches. With `json_string`, it is the
// content of a JSON string literal: characters that JSON must escape (" \ and controls) are produced as escapes, and
// `search` pads with the `char` rule (which the caller must define, as json_schema_grammar does).
std::string regex_to_gbnf_expression(std::string_view pattern, regex_match mode, bool json_string);

// A whole grammar whose root matches exactly the texts the pattern matches in full.
std::string regex_to_gbnf(std::string_view pattern);

// Most characters of a pattern, and most nested groups.
inline constexpr size_t max_regex_length = 16384;
inline constexpr size_t max_regex_nesting = 100;

} // namespace strata::grammar
