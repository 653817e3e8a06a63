// A pipeline rank as the engine sees it while sizing the KV cache: its layers, the KV bytes its plan left and its
// share of a block, and the memory of its KV pools. A rank is a worker in this process (worker.hpp) or a process of its
// own reached through the transport (remote_rank.hpp); the engine sizes both alike.
#pragma once

#include "kv/block_storage.hpp"
#include "kv/kv_cache.hpp"

#include <cstdint>
#include <memory>
#include <string>

namespace strata::engine {

// A pipeline rank's share of the model: layers [layer_first, layer_end) of n_layer (rank 0 of 1: every layer).
struct pipeline_stage {
    int32_t rank = 0, n_ranks = 1;
    int32_t layer_first = 0, layer_end = 0;
    bool first() const { return layer_first == 0; }
};

class pipeline_rank {
  public:
    virtual ~pipeline_rank() = default;
    virtual const pipeline_stage &stage() const = 0;
    // The bytes of one KV block of this rank's layers.
    virtual uint64_t kv_block_bytes() const = 0;
    // The device KV bytes this rank's memory plan left (kv_cache_memory when set).
    virtual uint64_t device_kv_budget() const = 0;
    // The KV pools' memory (worker.hpp: allocate_device_kv, allocate_tier_kv).
    virtual std::unique_ptr<kv::block_storage> allocate_device_kv(uint64_t n_blocks, uint64_t block_bytes) = 0;
    virtual std::unique_ptr<kv::block_storage> allocate_tier_kv(kv::tier t, const std::string &name, uint64_t n_blocks,
                                                                uint64_t align, uint64_t block_bytes) = 0;
};

} // namespace strata::engine
