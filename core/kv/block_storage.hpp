// Where the bytes of KV blocks live: device memory or a region of a tier plugin. The KV cache moves whole blocks
// between storages (swap, spill, prefix demotion) without knowing which device or tier is behind them.
#pragma once

#include <strata/plugin_abi.h>

#include <cstdint>
#include <memory>

namespace strata::kv {

class block_storage {
  public:
    virtual ~block_storage() = default;
    // Address the device's ops may read and write for block i, or nullptr when the block must be copied into device
    // memory before a forward pass can use it.
    virtual void *device_address(uint32_t i) = 0;
    // Host address of block i when the CPU can read it directly, else nullptr.
    virtual void *host_address(uint32_t i) = 0;
    // Whole-block copies between block i and host memory; throw strata::error on failure.
    virtual void load(uint32_t i, void *host_dst) = 0;
    virtual void store(uint32_t i, const void *host_src) = 0;
};

// Blocks of `block_bytes` at base + i * block_bytes in device memory (from the device's mem_alloc). Copies use the
// device's `copy` slot when it has one, memcpy otherwise.
std::unique_ptr<block_storage> make_device_storage(const strata_device_desc *desc, strata_device *dev, void *base,
                                                   uint64_t block_bytes);

// Blocks at offset i * stride of one region of a tier. When the tier maps the region, the CPU (and a device that
// reads host memory) use it in place; otherwise every access goes through the tier's read/write.
std::unique_ptr<block_storage> make_tier_storage(const strata_tier_desc *desc, strata_tier *tier, uint64_t region,
                                                 uint64_t stride, uint64_t block_bytes, bool device_reads_host);

// Copies block `si` of `src` into block `di` of `dst` through host memory (`bounce` holds one block).
void copy_block(block_storage &src, uint32_t si, block_storage &dst, uint32_t di, void *bounce);

} // namespace strata::kv
