// The `separate_memory` test mode's "device memory": the ranges mem_alloc handed out. In that mode every op refuses a
// pointer outside them where a GPU's kernel would fault (weights, activations, KV blocks) and `copy` checks its
// direction, so a host that hands host memory to the "GPU" fails its tests here instead of only on a real GPU.
// Index arrays (tokens, positions, block tables) are host memory by the ABI and are not checked.
#pragma once

#include <strata/plugin_abi.h>

#include <cstdint>
#include <map>
#include <mutex>

namespace strata::cpu {

class device_ranges {
  public:
    void add(const void *p, uint64_t bytes);
    void remove(const void *p);
    // True when [p, p + bytes) lies inside one range.
    bool contains(const void *p, uint64_t bytes) const;

  private:
    mutable std::mutex mu_; // mem_alloc/mem_free on the engine thread, copies on prefetch threads
    std::map<uintptr_t, uint64_t> ranges_;
};

// STRATA_OK, or an error naming the op and the argument that is not device memory. A no-op unless the device is in
// separate_memory mode.
int32_t require_device_memory(const strata_device *dev, const void *p, uint64_t bytes, const char *op,
                              const char *what, strata_status *st);

// The direction of a copy against the ranges: H2D writes device memory from host memory, D2H the reverse, D2D both
// device. A no-op unless in separate_memory mode.
int32_t check_copy_direction(const strata_device *dev, void *dst, const void *src, uint64_t bytes, int32_t kind,
                             strata_status *st);

} // namespace strata::cpu
