// Byte-size strings ("16GiB", "1.5GB") and "did you mean" suggestions for config and command-line messages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace strata::config {

// Parses "16GiB", "512MiB", "1.5GB", "4096", "2 GiB". Units are case-insensitive: KiB/MiB/GiB/TiB are binary
// (powers of 1024), KB/MB/GB/TB decimal, B or no unit means bytes. Fractions round to the nearest byte.
// Throws strata::error with a hint on anything else (negative numbers, unknown units, overflow).
uint64_t parse_bytes(std::string_view text);

// Human-readable binary size: "512 B", "1.50 GiB".
std::string format_bytes(uint64_t bytes);

// Optimal-string-alignment distance: insertions, deletions, substitutions and adjacent transpositions cost 1.
// Stops early and returns cap + 1 once the distance is sure to exceed `cap`.
size_t edit_distance(std::string_view a, std::string_view b, size_t cap = SIZE_MAX);

// The candidate nearest to `word`, or "" when none is close enough to be a plausible typo (distance at most a
// third of the word's length, between 1 and 3).
std::string closest(std::string_view word, const std::vector<std::string> &candidates);

} // namespace strata::config
