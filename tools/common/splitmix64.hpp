// splitmix64: a fast, seedable generator whose output is identical on every machine and standard library (std's
// distributions are not), for the tools' random weights and prompts.
#pragma once

#include <cstdint>

namespace strata::tools {

struct splitmix64 {
    uint64_t s;
    uint64_t next() {
        uint64_t z = (s += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    // Uniform in [-1, 1), 24 bits of the next output.
    float uniform() { return static_cast<float>(next() >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f; }
};

} // namespace strata::tools
