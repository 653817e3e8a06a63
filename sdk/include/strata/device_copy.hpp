// Copies between host memory and a device's memory, said once for the host and plugins alike (header-only): a device
// with a `copy` slot has memory of its own and copies through it; a device without one computes in host memory, so
// the copy is a memcpy.
#pragma once

#include <strata/plugin_abi.h>

#include <cstdint>
#include <cstring>

namespace strata {

// `kind` is STRATA_COPY_H2D (dst in device memory), STRATA_COPY_D2H (src in device memory) or STRATA_COPY_D2D. Returns STRATA_OK or the
// device's error code with `st` filled in.
inline int32_t device_copy(const strata_device_desc *desc, strata_device *dev, void *dst, const void *src, uint64_t bytes,
                           int32_t kind, strata_status *st) {
    if (STRATA_HAS_SLOT(desc, copy)) return desc->copy(dev, dst, src, bytes, kind, st);
    std::memcpy(dst, src, bytes);
    return STRATA_OK;
}

} // namespace strata
