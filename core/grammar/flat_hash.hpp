// A small open-addressing hash map from 64-bit keys to 32-bit values, for the matcher's hot paths (interning parse
// stack nodes and token filter states), where std::unordered_map's node allocations would dominate. Internal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace strata::grammar::detail {

inline uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

class flat_map_u64 {
  public:
    static constexpr uint64_t empty_key = ~uint64_t{0}; // may not be used as a key
    static constexpr uint32_t not_found = ~uint32_t{0};

    flat_map_u64() { reset(16); }

    void clear() {
        if (size_ == 0) return;
        for (slot &s : slots_) s.key = empty_key;
        size_ = 0;
    }

    uint32_t find(uint64_t key) const {
        for (size_t i = mix64(key) & mask_;; i = (i + 1) & mask_) {
            if (slots_[i].key == key) return slots_[i].value;
            if (slots_[i].key == empty_key) return not_found;
        }
    }

    // The value for key, inserting `value` when absent; `inserted` tells which.
    uint32_t insert(uint64_t key, uint32_t value, bool &inserted) {
        if ((size_ + 1) * 2 > slots_.size()) grow();
        for (size_t i = mix64(key) & mask_;; i = (i + 1) & mask_) {
            if (slots_[i].key == key) {
                inserted = false;
                return slots_[i].value;
            }
            if (slots_[i].key == empty_key) {
                slots_[i] = {key, value};
                ++size_;
                inserted = true;
                return value;
            }
        }
    }

    // Sets key's value, inserting the key when absent.
    void assign(uint64_t key, uint32_t value) {
        if ((size_ + 1) * 2 > slots_.size()) grow();
        for (size_t i = mix64(key) & mask_;; i = (i + 1) & mask_) {
            if (slots_[i].key == key) {
                slots_[i].value = value;
                return;
            }
            if (slots_[i].key == empty_key) {
                slots_[i] = {key, value};
                ++size_;
                return;
            }
        }
    }

    size_t size() const { return size_; }

  private:
    struct slot {
        uint64_t key;
        uint32_t value;
    };

    void reset(size_t capacity) {
        slots_.assign(capacity, slot{empty_key, 0});
        mask_ = capacity - 1;
        size_ = 0;
    }

    void grow() {
        std::vector<slot> old = std::move(slots_);
        reset(old.size() * 2);
        for (const slot &s : old) {
            if (s.key == empty_key) continue;
            size_t i = mix64(s.key) & mask_;
            while (slots_[i].key != empty_key) i = (i + 1) & mask_;
            slots_[i] = s;
            ++size_;
        }
    }

    std::vector<slot> slots_;
    size_t mask_ = 0;
    size_t size_ = 0;
};

} // namespace strata::grammar::detail
