// The prefix store's in-memory index: which block hashes have an entry on disk, in least-recently-used order.
// Nodes live in one vector and the hash table is open addressing, so memory grows only when the entry count
// reaches a new high; steady-state insert, touch and erase allocate nothing. Not thread-safe (the store locks).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace strata::kv {

class lru_index {
  public:
    bool contains(uint64_t hash) const { return find_slot(hash) != npos; }
    size_t size() const { return size_; }
    // Adds `hash` as the most recent entry, or makes an existing one the most recent.
    void insert_or_touch(uint64_t hash);
    // Makes an existing entry the most recent; false when absent.
    bool touch(uint64_t hash);
    bool erase(uint64_t hash);
    // The least recently used entry, if any.
    std::optional<uint64_t> oldest() const;

  private:
    static constexpr uint32_t none = UINT32_MAX;
    static constexpr size_t npos = SIZE_MAX;
    struct node {
        uint64_t hash;
        uint32_t older, newer; // neighbours in LRU order (none at the ends); `newer` links the free list
    };

    size_t find_slot(uint64_t hash) const; // slot in table_ holding the node of `hash`, or npos
    size_t home(uint64_t hash) const;
    void grow_table();
    void unlink(uint32_t n);
    void push_newest(uint32_t n);

    std::vector<node> nodes_;
    std::vector<uint32_t> table_; // node index + 1; 0 = empty slot; size a power of two, at most half full
    uint32_t free_ = none;
    uint32_t oldest_ = none, newest_ = none;
    size_t size_ = 0;
};

} // namespace strata::kv
