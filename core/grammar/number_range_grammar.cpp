#include "grammar/number_range_grammar.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>
#include <vector>

namespace strata::grammar {

namespace {

bool all_of(std::string_view s, char c) { return std::all_of(s.begin(), s.end(), [c](char x) { return x == c; }); }

std::string digit_range(char from, char to) {
    if (from == to) return fmt::format("\"{}\"", from);
    return fmt::format("[{}-{}]", from, to);
}

std::string any_digits(size_t n) {
    if (n == 1) return "[0-9]";
    return fmt::format("[0-9]{{{}}}", n);
}

// Decimal numbers of equal length from a to b (a <= b as numbers), as a GBNF sequence.
std::string same_length_range(const std::string &a, const std::string &b) {
    if (a == b) return fmt::format("\"{}\"", a);
    size_t i = 0;
    while (a[i] == b[i]) ++i;
    const std::string prefix = i > 0 ? fmt::format("\"{}\" ", a.substr(0, i)) : "";
    const std::string as = a.substr(i + 1), bs = b.substr(i + 1);
    const size_t n = as.size();
    if (n == 0) return prefix + digit_range(a[i], b[i]);
    if (all_of(as, '0') && all_of(bs, '9')) return prefix + digit_range(a[i], b[i]) + " " + any_digits(n);
    std::vector<std::string> alts;
    char full_from = a[i], full_to = b[i];
    if (!all_of(as, '0')) {
        alts.push_back(fmt::format("\"{}\" ({})", a[i], same_length_range(as, std::string(n, '9'))));
        ++full_from;
    }
    const bool high_partial = !all_of(bs, '9');
    if (high_partial) --full_to;
    if (full_from <= full_to) alts.push_back(digit_range(full_from, full_to) + " " + any_digits(n));
    if (high_partial) alts.push_back(fmt::format("\"{}\" ({})", b[i], same_length_range(std::string(n, '0'), bs)));
    std::string out;
    for (const std::string &alt : alts) out += (out.empty() ? "" : " | ") + alt;
    return prefix + "(" + out + ")";
}

} // namespace

std::string uint_range_gbnf(uint64_t lo, uint64_t hi) {
    std::string out;
    uint64_t low = 1;
    for (size_t digits = 1; digits <= 20 && lo <= hi; ++digits, low *= 10) {
        const uint64_t high = digits >= 20 ? UINT64_MAX : low * 10 - 1;
        if (hi < (digits == 1 ? 0 : low) || lo > high) continue;
        const uint64_t a = std::max(lo, digits == 1 ? uint64_t{0} : low), b = std::min(hi, high);
        out += (out.empty() ? "" : " | ") + same_length_range(std::to_string(a), std::to_string(b));
    }
    return out;
}

std::string integer_range_gbnf(int64_t lo, int64_t hi) {
    std::string body;
    if (lo < 0) {
        const uint64_t a = hi < 0 ? static_cast<uint64_t>(-hi) : 1, b = static_cast<uint64_t>(-lo);
        body = "\"-\" (" + uint_range_gbnf(a, b) + ")";
    }
    if (hi >= 0)
        body += (body.empty() ? "" : " | ") +
                uint_range_gbnf(static_cast<uint64_t>(std::max<int64_t>(lo, 0)), static_cast<uint64_t>(hi));
    return body;
}

namespace {

// Decimal numbers y with a <= y <= b (0 <= a <= b whole numbers), either end exclusive, or b open (then b is the
// largest 16-digit number and any fraction may follow it).
std::string segment(uint64_t a, bool a_excl, uint64_t b, bool b_excl, bool b_open) {
    const std::string frac = "(\".\" [0-9]{1,16})?";
    const std::string zeros = "(\".\" \"0\"{1,16})?";
    std::vector<std::string> alts;
    if (a == b) {
        if (!a_excl && !b_excl) alts.push_back(fmt::format("\"{}\" {}", a, b_open ? frac : zeros));
    } else {
        if (a + 1 <= b - 1) alts.push_back("(" + uint_range_gbnf(a + 1, b - 1) + ") " + frac);
        // Just above an exclusive a: a fraction with a non-zero digit somewhere.
        alts.push_back(a_excl ? fmt::format("\"{}\" \".\" \"0\"{{0,15}} [1-9] [0-9]{{0,15}}", a)
                              : fmt::format("\"{}\" {}", a, frac));
        if (b_open) alts.push_back(fmt::format("\"{}\" {}", b, frac));
        else if (!b_excl) alts.push_back(fmt::format("\"{}\" {}", b, zeros));
    }
    std::string out;
    for (const std::string &x : alts) out += (out.empty() ? "" : " | ") + x;
    return out;
}

} // namespace

std::string number_range_gbnf(std::optional<number_bound> lo_b, std::optional<number_bound> hi_b) {
    const bool lo_open = !lo_b, hi_open = !hi_b;
    const int64_t lo = lo_open ? -max_json_integer : lo_b->value;
    const int64_t hi = hi_open ? max_json_integer : hi_b->value;
    const bool lo_excl = !lo_open && lo_b->exclusive, hi_excl = !hi_open && hi_b->exclusive;
    if (lo > hi || (lo == hi && (lo_excl || hi_excl))) return "";
    std::string body;
    if (hi >= 0 && !(hi == 0 && hi_excl)) { // x >= 0
        const bool a_excl = lo >= 0 && lo_excl;
        body = segment(static_cast<uint64_t>(std::max<int64_t>(lo, 0)), a_excl, static_cast<uint64_t>(hi), hi_excl,
                       hi_open);
    }
    if (lo < 0) { // x = -y with max(0, -hi) <= y <= -lo ("-0" and "-0.0" are zero, so they belong here too)
        const uint64_t a = hi < 0 ? static_cast<uint64_t>(-hi) : 0;
        const bool a_excl = hi <= 0 && hi_excl;
        const std::string neg = segment(a, a_excl, static_cast<uint64_t>(-lo), lo_excl, lo_open);
        if (!neg.empty()) body += (body.empty() ? "" : " | ") + ("\"-\" (" + neg + ")");
    }
    return body;
}

} // namespace strata::grammar
