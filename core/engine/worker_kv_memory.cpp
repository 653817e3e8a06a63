// Worker: the memory of the KV pools. Device blocks are allocated on the device and touched at once (as a GPU engine
// reserves its KV memory up front); host and NVMe pools are regions of their tiers, page-locked for a device with
// its own memory so swaps run at the link's speed. The engine's KV cache decides which block holds what.
#include "engine/worker.hpp"

#include "common/error.hpp"
#include "common/log.hpp"
#include "common/progress.hpp"
#include "engine/engine_options.hpp"
#include "engine/engine_util.hpp"
#include "engine/step_builder.hpp"

#include <strata/kv_layout.hpp>

#include <algorithm>
#include <cstring>

namespace strata::engine {

using namespace detail;

uint64_t worker::kv_block_bytes() const {
    return kv_layout::block_bytes(stage_.layer_end - stage_.layer_first, opts_.kv.block_size,
                                  int64_t{hp_.n_head_kv} * hp_.head_dim, opts_.kv.kv_type);
}

std::unique_ptr<kv::block_storage> worker::allocate_device_kv(uint64_t n_blocks, uint64_t block_bytes) {
    const uint64_t total = n_blocks * block_bytes;
    strata_status st{};
    void *base = device_desc_.desc->mem_alloc(device_, total, &st);
    if (base == nullptr) {
        fail("device '{}' could not allocate the KV cache ({}): {}; lower --kv-cache-memory", device_name_,
             human(total), status_text(st));
    }
    device_allocations_.push_back(base);
    // Touch the whole pool now, as a GPU engine reserves its KV memory up front: resident memory is then flat under
    // load instead of growing as the prefix cache first reaches each block.
    if (device_reads_host_) { // host memory behind the device (a GPU's is reserved by its allocator)
        const uint64_t chunk = std::min<uint64_t>(uint64_t{64} << 20, total);
        const bool has_copy = STRATA_HAS_SLOT(device_desc_.desc, copy);
        std::vector<unsigned char> zeros(has_copy ? chunk : 0);
        std::unique_ptr<progress> bar;
        if (total >= (uint64_t{256} << 20)) bar = std::make_unique<progress>(fmt::format("reserving {} of KV cache", human(total)), total);
        for (uint64_t off = 0; off < total; off += chunk) {
            const uint64_t n = std::min<uint64_t>(chunk, total - off);
            char *dst = static_cast<char *>(base) + off;
            if (!has_copy) std::memset(dst, 0, n);
            else if (device_desc_.desc->copy(device_, dst, zeros.data(), n, STRATA_COPY_H2D, &st) != STRATA_OK)
                fail("device '{}' could not initialise its KV cache: {}", device_name_, status_text(st));
            if (bar) bar->update(off + n);
        }
        if (bar) bar->finish();
    }
    auto storage = kv::make_device_storage(device_desc_.desc, device_, base, block_bytes);
    kv_storage_[static_cast<int>(kv::tier::device)] = storage.get();
    return storage;
}

std::unique_ptr<kv::block_storage> worker::allocate_tier_kv(kv::tier t, const std::string &name, uint64_t n,
                                                            uint64_t align, uint64_t block_bytes) {
    auto [desc, tier] = weights_ ? weights_->tier(name) : std::pair<const strata_tier_desc *, strata_tier *>{};
    if (desc == nullptr) fail("KV tier '{}' was not created", name);
    const uint64_t stride = (block_bytes + align - 1) / align * align;
    strata_status st{};
    uint64_t region = 0;
    if (desc->region_alloc(tier, n * stride, &region, &st) != STRATA_OK)
        fail("tier '{}' could not hold {} of KV cache: {}", name, human(n * stride), status_text(st));
    auto storage = kv::make_tier_storage(desc, tier, region, stride, block_bytes, device_reads_host_);
    // A GPU swaps KV blocks at the link's speed only from page-locked memory.
    void *mapped = STRATA_HAS_SLOT(desc, map) ? desc->map(tier, region) : nullptr;
    if (mapped != nullptr && !device_reads_host_ && STRATA_HAS_SLOT(device_desc_.desc, host_register)) {
        if (device_desc_.desc->host_register(device_, mapped, n * stride, &st) == STRATA_OK)
            registered_.push_back(mapped);
        else
            log::warn("kv", "could not page-lock the {} KV pool for device '{}' ({}); swaps run at pageable speed",
                      name, device_name_, status_text(st));
    }
    kv_storage_[static_cast<int>(t)] = storage.get();
    return storage;
}

void worker::bind_kv(size_t max_step_blocks) { block_base_.reserve(max_step_blocks); }

} // namespace strata::engine
