// The rounding helpers ggml's reference quantizers share, reproduced bit for bit so the bytes Strata writes equal
// llama.cpp's: nearest_int (round half to even through the 1.5 * 2^23 trick, defined for |v| <= 2^22) and the
// nearest entry of a sorted int8 grid (IQ4's non-linear values).
#pragma once

#include <cstdint>
#include <cstring>

namespace strata::quants {

// ggml's nearest_int: adds 1.5 * 2^23 so the integer lands in the low mantissa bits. Out-of-range input (which no
// finite block produces) gives a defined, meaningless value, never undefined behaviour.
inline int nearest_int(float v) {
    const float shifted = v + 12582912.0f;
    int32_t bits;
    std::memcpy(&bits, &shifted, sizeof bits);
    return (bits & 0x007fffff) - 0x00400000;
}

// Index of the grid value nearest to x (ties to the lower one), grid sorted ascending: ggml's best_index_int8.
inline int nearest_grid_index(int n, const int8_t *grid, float x) {
    if (x <= grid[0]) return 0;
    if (x >= grid[n - 1]) return n - 1;
    int lo = 0, hi = n - 1;
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (x < grid[mid]) hi = mid;
        else lo = mid;
    }
    return x - grid[hi - 1] < grid[hi] - x ? hi - 1 : hi;
}

// trunc(v) clamped to [0, max]: the (int8_t)/(uint8_t) casts of ggml's 32-element quantizers, which only ever see
// values inside that range for finite input; NaN becomes 0 instead of undefined behaviour.
inline uint8_t truncate_to_level(float v, int max) {
    if (!(v >= 0.0f)) return 0;
    if (v >= static_cast<float>(max)) return static_cast<uint8_t>(max);
    return static_cast<uint8_t>(v);
}

} // namespace strata::quants
