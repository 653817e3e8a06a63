// Deterministic inputs shared by the quant tests.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace strata::quants::testing {

inline std::vector<float> normal_values(int64_t n, uint32_t seed, float stddev = 1.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.0f, stddev);
    std::vector<float> v(static_cast<size_t>(n));
    for (auto &x : v) x = dist(rng);
    return v;
}

inline std::vector<float> uniform_values(int64_t n, uint32_t seed, float lo, float hi) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(static_cast<size_t>(n));
    for (auto &x : v) x = dist(rng);
    return v;
}

} // namespace strata::quants::testing
