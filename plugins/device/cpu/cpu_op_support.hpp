// Small helpers the CPU device's op files share: the parallel threshold and the position check.
#pragma once

#include <strata/plugin.hpp>

#include <cstdint>

namespace strata::cpu {

inline constexpr int32_t invalid = STRATA_ERR_INVALID_ARGUMENT;

// Below this many float operations an op runs on the calling thread: waking workers would cost more than it saves.
inline constexpr int64_t parallel_min_work = 1 << 15;

inline int32_t check_positions(const int32_t *positions, int32_t n_tokens, const char *what, strata_status *st) {
    if (positions == nullptr) return strata::plugin::fail(st, invalid, "cpu %s: positions is NULL", what);
    for (int32_t t = 0; t < n_tokens; ++t)
        if (positions[t] < 0)
            return strata::plugin::fail(st, invalid, "cpu %s: positions[%d] = %d; positions must be >= 0", what, t,
                                        positions[t]);
    return STRATA_OK;
}

} // namespace strata::cpu
