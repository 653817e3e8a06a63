// Small helpers the CPU device's op files share: the parallel threshold, the device-memory check and the position
// check.
#pragma once

#include "separate_memory.hpp"

#include <strata/plugin.hpp>

#include <cstdint>

namespace strata::cpu {

inline constexpr int32_t invalid = STRATA_ERR_INVALID_ARGUMENT;

// In separate_memory mode: an error unless `p` is device memory (separate_memory.hpp); for ops with `dev` and `st`.
#define STRATA_REQUIRE_DEVICE(p, bytes, op, what)                                                                      \
    do {                                                                                                               \
        if (int32_t rc_ = require_device_memory(dev, (p), (bytes), (op), (what), st); rc_ != STRATA_OK) return rc_;     \
    } while (0)


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
