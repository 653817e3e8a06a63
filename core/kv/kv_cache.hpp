// The paged KV cache: blocks of `block_size` tokens in up to three pools (device memory, a host tier sized by
// swap_space, an NVMe tier for swapped sequences), per-sequence block tables with reference counts and copy-on-write,
// and the prefix cache: full blocks keyed by a chained hash of their tokens and the model's fingerprint, kept after
// their sequences finish and demoted device -> host -> a persistent store instead of dropped.
//
// Only the engine's worker thread calls it; stats() is copied out by the engine.
#pragma once

#include "kv/block_hash_index.hpp"
#include "kv/block_lru.hpp"
#include "kv/block_storage.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

namespace strata::kv {

enum class tier : uint8_t { device = 0, host = 1, nvme = 2 };
constexpr int n_tiers = 3;
const char *tier_name(tier t); // "device", "CPU", "NVMe" (as the log lines say)

struct block_ref {
    tier where = tier::device;
    uint32_t index = 0;
};

// One sequence's KV: its block table and the chained hashes of its full blocks (hashes.size() <= table.size()).
struct seq_blocks {
    std::vector<block_ref> table;
    std::vector<uint64_t> hashes;
    // Room for a sequence of up to max_tokens tokens, so a block filling in the step loop never reallocates these.
    void reserve(int32_t max_tokens, int32_t block_size) {
        const auto n = static_cast<size_t>((int64_t{max_tokens} + block_size - 1) / block_size);
        table.reserve(n);
        hashes.reserve(n);
    }
};

// Persistent prefix blocks (kv::prefix_store behind an adapter; a fake in tests).
class block_store {
  public:
    virtual ~block_store() = default;
    virtual bool contains(uint64_t hash) const = 0;
    virtual bool put(uint64_t hash, std::span<const int32_t> tokens, const void *payload) = 0;
    virtual bool get(uint64_t hash, std::span<const int32_t> tokens, void *payload) = 0;
    virtual uint64_t entries() const = 0;
    virtual uint64_t capacity_entries() const = 0;
};

struct kv_cache_config {
    int32_t block_size = 16;
    uint64_t block_bytes = 0;
    bool prefix_caching = true;
    uint64_t fingerprint = 0;       // of the model: blocks of another model never match
    bool device_reads_host = false; // a running sequence may keep blocks in the host pool (attended in place)
};

struct kv_cache_stats {
    int64_t blocks_total[n_tiers]{}, blocks_used[n_tiers]{}, blocks_cached[n_tiers]{};
    int64_t prefix_queries = 0, prefix_hits[n_tiers]{}; // in tokens
    int64_t bytes_out = 0, bytes_in = 0;                 // device -> lower tiers, lower tiers -> device
};

class kv_cache {
  public:
    explicit kv_cache(kv_cache_config cfg);
    ~kv_cache();
    kv_cache(const kv_cache &) = delete;
    kv_cache &operator=(const kv_cache &) = delete;

    // Pools: the device pool is required; host and nvme are optional. The storage must outlive the cache.
    void add_pool(tier t, uint32_t n_blocks, std::unique_ptr<block_storage> storage);
    void set_store(block_store *store) { store_ = store; }

    const kv_cache_config &config() const { return cfg_; }
    uint32_t capacity(tier t) const;
    bool has_pool(tier t) const;
    // Device blocks that are free or hold only cached prefixes (reclaimable without touching a sequence).
    uint32_t reclaimable_device_blocks() const;
    uint32_t reclaimable_host_blocks() const;
    // Device memory address of a block for the forward pass (nullptr when it must be swapped in first).
    void *device_address(block_ref b) const;
    uint32_t blocks_in(const seq_blocks &s, tier t) const;

    // Prefix cache: looks up the full blocks of tokens[0, max_tokens) in order, takes a reference to each device hit
    // and loads host and store hits into new device blocks; stops at the first miss. Appends to an empty `s` and
    // returns the number of tokens whose KV is now present (a multiple of block_size).
    int32_t match_prefix(seq_blocks &s, std::span<const int32_t> tokens, int32_t max_tokens);
    // After KV for tokens[0, n_computed) is written: hashes the blocks that became full and offers them to the cache.
    void register_full_blocks(seq_blocks &s, std::span<const int32_t> tokens, int32_t n_computed);

    // Grows `s` with device blocks until it has slots for n_tokens (evicting cached prefixes as needed). All or
    // nothing: false, with `s` unchanged, when the device cannot supply them.
    bool ensure_slots(seq_blocks &s, int32_t n_tokens);
    // Copy-on-write: makes the block holding slot `pos` private to `s` before it is written. False when no device
    // block is available for the copy.
    bool make_writable(seq_blocks &s, int32_t pos);
    // A second table sharing every block of `src` (reference counts up).
    void fork(const seq_blocks &src, seq_blocks &dst);
    // Drops every reference; full hashed blocks stay cached, the rest return to their pools.
    void release(seq_blocks &s);

    // Preemption by swap: every device block of `s` moves to the host pool, or the NVMe pool when the host is full.
    // All or nothing; returns false (nothing moved) when the lower tiers cannot take them. `to` gets the lowest tier
    // used.
    bool swap_out(seq_blocks &s, tier &to, uint64_t &bytes);
    // Moves every block outside the device back onto it while the device has more than `keep_free` reclaimable
    // blocks; when the device reads host memory the rest may stay in (or, from NVMe, come to) the host pool. False
    // (with nothing lost) when `s` still cannot run.
    bool swap_in(seq_blocks &s, uint32_t keep_free, uint64_t &bytes);
    // Long contexts: moves the oldest device block of `s` to the host pool so the device can hold newer ones. Only
    // when the device reads host memory; false when it does not or the host is full.
    bool spill_oldest(seq_blocks &s);

    // Writes every hashed block not yet in the store (clean shutdown), so prefixes survive a restart.
    uint64_t persist_prefixes();

    kv_cache_stats stats() const;

  private:
    struct pool {
        std::unique_ptr<block_storage> storage;
        uint32_t n = 0;
        std::vector<int32_t> ref;
        std::vector<uint64_t> hash;           // 0 = not a cached prefix block
        std::vector<int32_t> tokens;          // block_size ids per block (for hashed blocks: the store verifies them)
        std::vector<uint32_t> free;           // indexes
        block_lru lru;                        // ref 0, hashed: least recently used first
        block_hash_index by_hash;             // hash -> the block caching it
    };

    pool &p(tier t) { return *pools_[static_cast<int>(t)]; }
    const pool &p(tier t) const { return *pools_[static_cast<int>(t)]; }
    uint64_t block_hash(uint64_t parent, std::span<const int32_t> block_tokens) const;
    std::optional<uint32_t> take(tier t);          // a block with ref 1 (evicting a cached one if needed)
    void unref(block_ref b);
    void forget_hash(pool &pl, uint32_t i);
    void set_hash(pool &pl, uint32_t i, uint64_t h, std::span<const int32_t> toks);
    void evict_cached(tier t);                     // frees the LRU cached block of t (demoting it first)
    void demote(tier from, uint32_t i);            // copies a cached block one tier down (or to the store)
    void copy(block_ref from, block_ref to);
    void move_block(block_ref &r, block_ref dst, bool keep_cached);
    std::span<const int32_t> block_tokens(const pool &pl, uint32_t i) const;
    bool store_put(pool &pl, uint32_t i);

    kv_cache_config cfg_;
    std::unique_ptr<pool> pools_[n_tiers];
    block_store *store_ = nullptr;
    std::vector<unsigned char> bounce_;
    kv_cache_stats st_;
};

} // namespace strata::kv
