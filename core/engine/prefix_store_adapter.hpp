// The KV cache's view of the persistent prefix store (core/kv/prefix_store): the cache codes against the small
// kv::block_store interface so its unit tests can use an in-memory store.
#pragma once

#include "kv/kv_cache.hpp"
#include "kv/prefix_store.hpp"

#include <string>

namespace strata::engine {

class prefix_store_adapter final : public kv::block_store {
  public:
    prefix_store_adapter(const std::string &dir, uint64_t capacity_bytes, uint64_t fingerprint, int32_t block_size,
                         uint64_t block_bytes)
        : store_(kv::prefix_store::options{dir, capacity_bytes, fingerprint, block_size, block_bytes}) {}

    bool contains(uint64_t hash) const override { return store_.contains(hash); }
    bool put(uint64_t hash, std::span<const int32_t> tokens, const void *payload) override {
        return store_.put(hash, tokens, payload);
    }
    bool get(uint64_t hash, std::span<const int32_t> tokens, void *payload) override {
        return store_.get(hash, tokens, payload);
    }
    uint64_t entries() const override { return store_.entries(); }
    uint64_t capacity_entries() const override { return store_.capacity_entries(); }

  private:
    kv::prefix_store store_;
};

} // namespace strata::engine
