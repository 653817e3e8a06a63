// The prefix cache's lookup from a block hash to the pool block holding it, in arrays sized once with the pool: a
// chained hash table whose chain links are the blocks themselves (a block is indexed under at most one hash), so
// caching or forgetting a block in the step loop never allocates (a node-based map allocates one node per block).
#pragma once

#include <cstdint>
#include <vector>

namespace strata::kv {

class block_hash_index {
  public:
    static constexpr uint32_t none = UINT32_MAX;

    explicit block_hash_index(uint32_t n_blocks = 0) { resize(n_blocks); }

    // Empties the index and sizes it for blocks [0, n_blocks): a power of two of buckets, at least one per block.
    void resize(uint32_t n_blocks) {
        uint64_t buckets = 1;
        while (buckets < n_blocks) buckets <<= 1;
        mask_ = buckets - 1;
        head_.assign(buckets, none);
        next_.assign(n_blocks, none);
        key_.assign(n_blocks, 0);
    }

    // The block indexed under h, or none.
    uint32_t find(uint64_t h) const {
        for (uint32_t i = head_[h & mask_]; i != none; i = next_[i])
            if (key_[i] == h) return i;
        return none;
    }
    bool contains(uint64_t h) const { return find(h) != none; }

    // Indexes block i (not indexed now) under h.
    void insert(uint64_t h, uint32_t i) {
        uint32_t &head = head_[h & mask_];
        key_[i] = h;
        next_[i] = head;
        head = i;
    }

    // Removes block i from the index when it is indexed under h; nothing otherwise (it may share h's bucket under
    // another hash).
    void erase(uint64_t h, uint32_t i) {
        if (key_[i] != h) return;
        for (uint32_t *link = &head_[h & mask_]; *link != none; link = &next_[*link]) {
            if (*link != i) continue;
            *link = next_[i];
            next_[i] = none;
            return;
        }
    }

  private:
    std::vector<uint32_t> head_; // per bucket: the first block of its chain
    std::vector<uint32_t> next_; // per block: the next block of its chain
    std::vector<uint64_t> key_;  // per block: the hash it is indexed under
    uint64_t mask_ = 0;
};

} // namespace strata::kv
