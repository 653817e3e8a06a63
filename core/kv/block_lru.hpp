// The cached (unreferenced, hashed) blocks of a pool in least-recently-used order: a doubly linked list whose nodes
// are the block indexes themselves, in arrays sized once with the pool, so releasing a sequence's blocks into the
// prefix cache and evicting them never allocates.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace strata::kv {

class block_lru {
  public:
    explicit block_lru(uint32_t n_blocks = 0) { resize(n_blocks); }

    // Empties the list and sizes it for blocks [0, n_blocks).
    void resize(uint32_t n_blocks) {
        sentinel_ = n_blocks;
        prev_.assign(n_blocks + std::size_t{1}, n_blocks);
        next_.assign(n_blocks + std::size_t{1}, n_blocks);
        in_.assign(n_blocks, 0);
        size_ = 0;
    }

    bool empty() const { return size_ == 0; }
    uint32_t size() const { return size_; }
    bool contains(uint32_t i) const { return in_[i] != 0; }
    // The least recently used block (the list must not be empty).
    uint32_t front() const { return next_[sentinel_]; }

    // Block i (not in the list) becomes the most recently used.
    void push_back(uint32_t i) {
        const uint32_t last = prev_[sentinel_];
        prev_[i] = last;
        next_[i] = sentinel_;
        next_[last] = i;
        prev_[sentinel_] = i;
        in_[i] = 1;
        ++size_;
    }

    // Takes block i out of the list; nothing when it is not in it.
    void remove(uint32_t i) {
        if (!in_[i]) return;
        next_[prev_[i]] = next_[i];
        prev_[next_[i]] = prev_[i];
        in_[i] = 0;
        --size_;
    }

  private:
    std::vector<uint32_t> prev_, next_; // per block, and the sentinel at index n_blocks (head and tail)
    std::vector<uint8_t> in_;
    uint32_t sentinel_ = 0;
    uint32_t size_ = 0;
};

} // namespace strata::kv
