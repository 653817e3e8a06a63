// First-fit region allocator over one arena [0, capacity), shared by every tier plugin (header-only so each plugin
// compiles its own copy; nothing crosses a library boundary).
//
// Why first-fit with a coalescing free list: tiers hold few, large, long-lived regions (weight tensors), so a simple
// ordered map of free blocks is fast enough and keeps fragmentation low; freeing merges neighbours at once.
// Region ids come from a counter and are never reused, so a stale id is reported as "no such region" instead of
// silently aliasing a newer region that took the same place.
//
// Thread safety: allocate/release take the lock exclusively; find() takes it shared, so concurrent reads and writes
// of regions only contend on a reader lock.
#pragma once

#include <cstdint>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <unordered_map>

namespace strata::tier {

// Where a live region sits in the arena. `size` is what the caller asked for (the bounds of reads and writes);
// `reserved` is size rounded up to the allocator's alignment (what the region occupies).
struct extent {
    uint64_t offset = 0;
    uint64_t size = 0;
    uint64_t reserved = 0;
};

struct allocation {
    uint64_t id = 0;
    extent where;
};

// Why allocate() refused, for the caller's OUT_OF_MEMORY message.
struct arena_usage {
    uint64_t capacity = 0;
    uint64_t free_bytes = 0;
    uint64_t largest_free = 0;
};

class region_allocator {
  public:
    // alignment must be a power of two; capacity is rounded down to it.
    region_allocator(uint64_t capacity, uint64_t alignment)
        : alignment_(alignment), capacity_(capacity & ~(alignment - 1)), free_bytes_(capacity_) {
        if (capacity_ > 0) free_blocks_.emplace(0, capacity_);
    }

    uint64_t capacity() const { return capacity_; }
    uint64_t alignment() const { return alignment_; }

    // Reserves `bytes` (> 0) at the lowest offset that fits; nullopt when no free block is large enough.
    std::optional<allocation> allocate(uint64_t bytes) {
        if (bytes == 0 || bytes > capacity_) return std::nullopt; // also keeps the round-up below from overflowing
        const uint64_t reserved = (bytes + alignment_ - 1) & ~(alignment_ - 1);
        std::unique_lock lock(mutex_);
        for (auto it = free_blocks_.begin(); it != free_blocks_.end(); ++it) {
            if (it->second < reserved) continue;
            const uint64_t offset = it->first;
            const uint64_t rest = it->second - reserved;
            free_blocks_.erase(it);
            if (rest > 0) free_blocks_.emplace(offset + reserved, rest);
            const allocation a{next_id_++, extent{offset, bytes, reserved}};
            live_.emplace(a.id, a.where);
            free_bytes_ -= reserved;
            return a;
        }
        return std::nullopt;
    }

    // Returns the extent the region occupied; nullopt for an unknown (or already freed) id.
    std::optional<extent> release(uint64_t id) {
        std::unique_lock lock(mutex_);
        auto it = live_.find(id);
        if (it == live_.end()) return std::nullopt;
        const extent e = it->second;
        live_.erase(it);
        free_bytes_ += e.reserved;
        // Merge with the free neighbours on both sides so large regions fit again after many small frees.
        uint64_t offset = e.offset;
        uint64_t length = e.reserved;
        auto next = free_blocks_.lower_bound(offset);
        if (next != free_blocks_.end() && next->first == offset + length) {
            length += next->second;
            next = free_blocks_.erase(next);
        }
        if (next != free_blocks_.begin()) {
            auto prev = std::prev(next);
            if (prev->first + prev->second == offset) {
                offset = prev->first;
                length += prev->second;
                free_blocks_.erase(prev);
            }
        }
        free_blocks_.emplace(offset, length);
        return e;
    }

    std::optional<extent> find(uint64_t id) const {
        std::shared_lock lock(mutex_);
        auto it = live_.find(id);
        if (it == live_.end()) return std::nullopt;
        return it->second;
    }

    arena_usage usage() const {
        std::shared_lock lock(mutex_);
        arena_usage u{capacity_, free_bytes_, 0};
        for (const auto &[offset, length] : free_blocks_) u.largest_free = length > u.largest_free ? length : u.largest_free;
        return u;
    }

    size_t live_count() const {
        std::shared_lock lock(mutex_);
        return live_.size();
    }

  private:
    const uint64_t alignment_;
    const uint64_t capacity_;
    mutable std::shared_mutex mutex_;
    uint64_t free_bytes_;
    uint64_t next_id_ = 1; // 0 is never a valid region id
    std::map<uint64_t, uint64_t> free_blocks_; // offset -> length, ordered for first-fit and coalescing
    std::unordered_map<uint64_t, extent> live_;
};

} // namespace strata::tier
