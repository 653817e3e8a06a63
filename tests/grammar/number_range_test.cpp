// Numeric ranges as GBNF (JSON Schema minimum/maximum): every integer near the bounds of many ranges is accepted
// exactly when it lies in the range, numerals have no leading zeros or "-0"; and JSON numbers without exponent
// (quarters from -15 to 15, with and without trailing zeros, signed zeros) are accepted exactly when they lie between
// whole-number bounds that are inclusive, exclusive or open (-0 only where negative numbers may be).
#include "grammar/gbnf_parser.hpp"
#include "grammar/matcher.hpp"
#include "grammar/number_range_grammar.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace {

using strata::grammar::integer_range_gbnf;
using strata::grammar::matcher;
using strata::grammar::max_json_integer;
using strata::grammar::number_bound;
using strata::grammar::number_range_gbnf;
using strata::grammar::parse_gbnf;

bool matches(const matcher &start, const std::string &text) {
    matcher m = start;
    if (!m.accepts(text)) return false;
    m.advance(text);
    return m.can_end();
}

TEST(grammar_number_range, IntegersNearTheBounds) {
    std::vector<std::pair<int64_t, int64_t>> ranges = {{0, 150},   {1, 5},     {-5, 10},    {-300, -7},   {0, 0},
                                                       {-1, -1},   {9, 10},    {99, 1001},  {-1000, 999}, {5, 5},
                                                       {10, 19},   {100, 199}, {-99, -10},  {0, 9},       {7, 80}};
    std::mt19937 rng(3);
    for (int i = 0; i < 40; ++i) {
        const int64_t a = static_cast<int64_t>(rng() % 4000) - 2000, b = static_cast<int64_t>(rng() % 4000) - 2000;
        ranges.emplace_back(std::min(a, b), std::max(a, b));
    }
    for (const auto &[lo, hi] : ranges) {
        SCOPED_TRACE(std::to_string(lo) + ".." + std::to_string(hi));
        const matcher m(parse_gbnf("root ::= " + integer_range_gbnf(lo, hi)));
        for (int64_t x = lo - 120; x <= hi + 120; ++x) EXPECT_EQ(matches(m, std::to_string(x)), x >= lo && x <= hi) << x;
        EXPECT_FALSE(matches(m, "0" + std::to_string(std::max<int64_t>(lo, 1)))); // leading zero
        EXPECT_FALSE(matches(m, "-0"));
        EXPECT_FALSE(matches(m, ""));
    }
}

TEST(grammar_number_range, LargeBounds) {
    const matcher all(parse_gbnf("root ::= " + integer_range_gbnf(-max_json_integer, max_json_integer)));
    EXPECT_TRUE(matches(all, "9999999999999999"));
    EXPECT_TRUE(matches(all, "-9999999999999999"));
    EXPECT_FALSE(matches(all, "10000000000000000"));
    const matcher big(parse_gbnf("root ::= " + integer_range_gbnf(123456789012, 123456799999)));
    EXPECT_TRUE(matches(big, "123456789012"));
    EXPECT_TRUE(matches(big, "123456795555"));
    EXPECT_TRUE(matches(big, "123456799999"));
    EXPECT_FALSE(matches(big, "123456789011"));
    EXPECT_FALSE(matches(big, "123456800000"));
}

// x = k / 4, written in a few ways.
std::vector<std::string> spellings(int k) {
    const bool negative = k < 0;
    const int a = negative ? -k : k;
    const std::string sign = negative ? "-" : "";
    const std::string whole = std::to_string(a / 4);
    static const char *fractions[] = {"", ".25", ".5", ".75"};
    std::vector<std::string> out;
    if (a % 4 == 0) {
        out = {sign + whole, sign + whole + ".0", sign + whole + ".000"};
        if (k == 0) out.insert(out.end(), {"-0", "-0.0"});
    } else {
        out = {sign + whole + fractions[a % 4], sign + whole + fractions[a % 4] + "0"};
    }
    return out;
}

TEST(grammar_number_range, NumbersBetweenWholeBounds) {
    std::vector<std::optional<number_bound>> bounds = {std::nullopt};
    for (const int64_t v : {-7, -3, -1, 0, 1, 2, 5})
        for (const bool excl : {false, true}) bounds.push_back(number_bound{v, excl});
    size_t checked = 0;
    for (const auto &lo : bounds) {
        for (const auto &hi : bounds) {
            const std::string body = number_range_gbnf(lo, hi);
            const auto inside = [&](int k) { // compare k/4 with the bounds exactly
                const bool above = !lo || (lo->exclusive ? k > lo->value * 4 : k >= lo->value * 4);
                const bool below = !hi || (hi->exclusive ? k < hi->value * 4 : k <= hi->value * 4);
                return above && below;
            };
            bool any = false;
            for (int k = -60; k <= 60; ++k) any = any || inside(k);
            if (body.empty()) {
                EXPECT_FALSE(any);
                continue;
            }
            const matcher m(parse_gbnf("root ::= " + body));
            for (int k = -60; k <= 60; ++k) {
                for (const std::string &s : spellings(k)) {
                    // "-0" is zero, but it is only generated where negative numbers may be.
                    const bool negative_zero = s == "-0" || s == "-0.0";
                    const bool expected = inside(k) && (!negative_zero || !lo || lo->value < 0);
                    EXPECT_EQ(matches(m, s), expected)
                        << s << " with bounds " << (lo ? std::to_string(lo->value) + (lo->exclusive ? " excl" : "") : "open")
                        << " .. " << (hi ? std::to_string(hi->value) + (hi->exclusive ? " excl" : "") : "open");
                    ++checked;
                }
            }
            EXPECT_FALSE(matches(m, "1e2"));
            EXPECT_FALSE(matches(m, "01"));
        }
    }
    EXPECT_GT(checked, 10000u);
}

} // namespace
