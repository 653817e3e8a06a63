#include "separate_memory.hpp"

#include "cpu_device_state.hpp"

#include <strata/plugin.hpp>

namespace strata::cpu {

void device_ranges::add(const void *p, uint64_t bytes) {
    std::lock_guard lock(mu_);
    ranges_[reinterpret_cast<uintptr_t>(p)] = bytes;
}

void device_ranges::remove(const void *p) {
    std::lock_guard lock(mu_);
    ranges_.erase(reinterpret_cast<uintptr_t>(p));
}

bool device_ranges::contains(const void *p, uint64_t bytes) const {
    const auto a = reinterpret_cast<uintptr_t>(p);
    std::lock_guard lock(mu_);
    auto it = ranges_.upper_bound(a);
    if (it == ranges_.begin()) return false;
    --it;
    return a - it->first <= it->second && bytes <= it->second - (a - it->first);
}

int32_t require_device_memory(const strata_device *dev, const void *p, uint64_t bytes, const char *op,
                              const char *what, strata_status *st) {
    if (!dev->separate_memory || dev->ranges.contains(p, bytes)) return STRATA_OK;
    return strata::plugin::fail(st, STRATA_ERR_INVALID_ARGUMENT,
                                "cpu %s: %s (%p, %llu bytes) is not device memory (separate_memory mode: a GPU would "
                                "fault here)",
                                op, what, p, static_cast<unsigned long long>(bytes));
}

int32_t check_copy_direction(const strata_device *dev, void *dst, const void *src, uint64_t bytes, int32_t kind,
                             strata_status *st) {
    if (!dev->separate_memory || bytes == 0) return STRATA_OK;
    const bool dst_dev = dev->ranges.contains(dst, bytes), src_dev = dev->ranges.contains(src, bytes);
    const bool ok = kind == STRATA_COPY_H2D ? dst_dev && !src_dev
                    : kind == STRATA_COPY_D2H ? src_dev && !dst_dev
                                              : dst_dev && src_dev;
    if (ok) return STRATA_OK;
    return strata::plugin::fail(st, STRATA_ERR_INVALID_ARGUMENT,
                                "cpu copy: %s of %llu bytes from %s memory to %s memory (separate_memory mode)",
                                kind == STRATA_COPY_H2D ? "H2D" : kind == STRATA_COPY_D2H ? "D2H" : "D2D",
                                static_cast<unsigned long long>(bytes), src_dev ? "device" : "host",
                                dst_dev ? "device" : "host");
}

} // namespace strata::cpu
