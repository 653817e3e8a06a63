// GBNF text -> grammar, following llama.cpp's grammar format (grammars/README.md there): rules `name ::= ...` with
// alternatives `|`, sequences, groups `( )`, repetitions `* + ? {m} {m,} {m,n}`, string literals and character classes
// with the escapes \n \r \t \\ \" \[ \] \- \xHH \uHHHH \UHHHHHHHH, negated classes [^...], `.` for any character,
// `#` comments, and newlines inside groups or after `|`. Matching starts at the rule `root`.
//
// Every defect is a strata::error that says where (line and column) and what is wrong: a rule used but never defined,
// a rule defined twice, unbalanced parentheses, a bad escape, an empty grammar, llama.cpp token references (<[id]>,
// <text>: not supported, there is no vocabulary here), and left recursion, which the matcher cannot follow.
#pragma once

#include "grammar/grammar.hpp"

#include <memory>
#include <string_view>

namespace strata::grammar {

// Most nested parentheses in one rule; deeper nesting is an error (the parser recurses on groups).
inline constexpr size_t max_group_nesting = 200;

std::shared_ptr<const grammar> parse_gbnf(std::string_view text);

} // namespace strata::grammar
