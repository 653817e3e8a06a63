// Numeric ranges as GBNF, for JSON Schema's minimum / maximum / exclusiveMinimum / exclusiveMaximum: the decimal
// numerals of a range of integers (digit by digit, like a regular expression for "0 to 150"), and JSON numbers without
// exponent between whole-number bounds. Numerals have no leading zeros and at most 16 digits before the point, as the
// JSON grammars' integral-part rule.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace strata::grammar {

inline constexpr int64_t max_json_integer = 9999999999999999; // 16 digits

// Whole numbers lo..hi (0 <= lo <= hi): GBNF alternatives, e.g. 0..150 -> [0-9] | [1-9] [0-9] | "1" (...).
std::string uint_range_gbnf(uint64_t lo, uint64_t hi);

// JSON integers lo..hi (lo <= hi, both within +-max_json_integer): GBNF alternatives; "-0" is not produced.
std::string integer_range_gbnf(int64_t lo, int64_t hi);

struct number_bound {
    int64_t value; // within +-max_json_integer
    bool exclusive;
};

// JSON numbers without exponent (up to 16 fraction digits) from lo to hi, each end inclusive, exclusive or open
// (nullopt); GBNF alternatives, or "" when no number lies between the bounds.
std::string number_range_gbnf(std::optional<number_bound> lo, std::optional<number_bound> hi);

} // namespace strata::grammar
