#include "config/units.hpp"

#include "common/error.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>

namespace strata::config {

namespace {

struct unit {
    std::string_view name;
    uint64_t multiplier;
};

// Matched whole and case-insensitively; "" means plain bytes.
constexpr std::array<unit, 10> k_units{{
    {"b", 1ULL},
    {"kb", 1000ULL},
    {"mb", 1000ULL * 1000},
    {"gb", 1000ULL * 1000 * 1000},
    {"tb", 1000ULL * 1000 * 1000 * 1000},
    {"kib", 1ULL << 10},
    {"mib", 1ULL << 20},
    {"gib", 1ULL << 30},
    {"tib", 1ULL << 40},
    {"", 1ULL},
}};

std::string lower(std::string_view s) {
    std::string out(s);
    std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return out;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
    return s;
}

[[noreturn]] void bad_size(std::string_view text, std::string_view why) {
    fail("invalid byte size \"{}\": {}; write a whole or decimal number with an optional unit, e.g. 4096, "
         "512MiB, 16GiB or 1.5GB (KiB/MiB/GiB/TiB are powers of 1024, KB/MB/GB/TB powers of 1000)",
         text, why);
}

} // namespace

uint64_t parse_bytes(std::string_view text) {
    const std::string_view s = trim(text);
    if (s.empty()) bad_size(text, "it is empty");
    if (s.front() == '-') bad_size(text, "sizes cannot be negative");

    size_t pos = 0;
    uint64_t whole = 0;
    size_t whole_digits = 0;
    while (pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos]))) {
        const uint64_t digit = static_cast<uint64_t>(s[pos] - '0');
        if (__builtin_mul_overflow(whole, 10ULL, &whole) || __builtin_add_overflow(whole, digit, &whole))
            bad_size(text, "the number is too large");
        ++pos;
        ++whole_digits;
    }
    // The fraction is kept as digits so that "16GiB" stays exact; only the fractional part goes through a double.
    std::string fraction;
    if (pos < s.size() && s[pos] == '.') {
        ++pos;
        while (pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos]))) fraction += s[pos++];
    }
    if (whole_digits == 0 && fraction.empty()) bad_size(text, "it does not start with a number");

    const std::string suffix = lower(trim(s.substr(pos)));
    const auto it = std::find_if(k_units.begin(), k_units.end(), [&](const unit &u) { return u.name == suffix; });
    if (it == k_units.end()) {
        if (suffix == "k" || suffix == "m" || suffix == "g" || suffix == "t")
            bad_size(text, fmt::format("the unit '{}' is ambiguous", s.substr(pos)));
        bad_size(text, fmt::format("unknown unit '{}'", trim(s.substr(pos))));
    }

    uint64_t bytes = 0;
    if (__builtin_mul_overflow(whole, it->multiplier, &bytes)) bad_size(text, "it does not fit in 64 bits");
    if (!fraction.empty()) {
        const double frac = std::stod("0." + fraction);
        const auto extra = static_cast<uint64_t>(std::llround(frac * static_cast<double>(it->multiplier)));
        if (__builtin_add_overflow(bytes, extra, &bytes)) bad_size(text, "it does not fit in 64 bits");
    }
    return bytes;
}

std::string format_bytes(uint64_t bytes) {
    static constexpr std::array<std::string_view, 5> names{"B", "KiB", "MiB", "GiB", "TiB"};
    if (bytes < 1024) return fmt::format("{} B", bytes);
    double value = static_cast<double>(bytes);
    size_t i = 0;
    while (value >= 1024.0 && i + 1 < names.size()) {
        value /= 1024.0;
        ++i;
    }
    return fmt::format("{:.2f} {}", value, names[i]);
}

size_t edit_distance(std::string_view a, std::string_view b, size_t cap) {
    // Three rolling rows: the transposition rule looks two rows back.
    std::vector<size_t> two_back(b.size() + 1), prev(b.size() + 1), cur(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
    size_t prev_min = 0;
    for (size_t i = 1; i <= a.size(); ++i) {
        cur[0] = i;
        size_t row_min = cur[0];
        for (size_t j = 1; j <= b.size(); ++j) {
            const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
            cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost});
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
                cur[j] = std::min(cur[j], two_back[j - 2] + 1);
            row_min = std::min(row_min, cur[j]);
        }
        // Every later cell comes from one of the last two rows plus something: once both exceed the cap, so will
        // the answer.
        if (row_min > cap && prev_min > cap) return cap + 1;
        prev_min = row_min;
        std::swap(two_back, prev);
        std::swap(prev, cur);
    }
    return prev[b.size()];
}

std::string closest(std::string_view word, const std::vector<std::string> &candidates) {
    const size_t limit = std::clamp<size_t>(word.size() / 3, 1, 3);
    const std::string lowered = lower(word);
    std::string best;
    size_t best_distance = limit + 1;
    for (const std::string &c : candidates) {
        // The distance is at least the length difference: a long unknown word (a 4 KiB key in a bad file) costs
        // nothing instead of a quadratic comparison with every name.
        const size_t length_gap = lowered.size() > c.size() ? lowered.size() - c.size() : c.size() - lowered.size();
        if (length_gap >= best_distance) continue;
        const size_t d = edit_distance(lowered, lower(c), best_distance - 1);
        if (d < best_distance) {
            best_distance = d;
            best = c;
        }
    }
    return best;
}

} // namespace strata::config
