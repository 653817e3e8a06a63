// In-memory block storages and a fake persistent store for KV cache tests.
#pragma once

#include "kv/kv_cache.hpp"

#include <cstring>
#include <map>
#include <stdexcept>
#include <vector>

namespace strata::testing {

// Blocks in a plain vector; `host_visible` false makes every access go through load/store, as a GPU's memory would.
// fail_loads/fail_stores make the n-th load or store from now (0: the next) throw, as a tier's failed read or write
// does (block_storage turns it into a strata::error); `forever`: every one after it too.
class memory_storage final : public kv::block_storage {
  public:
    memory_storage(uint32_t n, uint64_t block_bytes, bool host_visible)
        : bytes_(block_bytes), host_visible_(host_visible), mem_(n * block_bytes) {}
    void *device_address(uint32_t i) override { return mem_.data() + i * bytes_; }
    void *host_address(uint32_t i) override { return host_visible_ ? mem_.data() + i * bytes_ : nullptr; }
    void load(uint32_t i, void *dst) override {
        fault(load_fault_, "read");
        std::memcpy(dst, mem_.data() + i * bytes_, bytes_);
    }
    void store(uint32_t i, const void *src) override {
        fault(store_fault_, "write");
        std::memcpy(mem_.data() + i * bytes_, src, bytes_);
    }
    unsigned char *raw(uint32_t i) { return mem_.data() + i * bytes_; }
    void fail_loads(int after, bool forever = false) { load_fault_ = {after, forever}; }
    void fail_stores(int after, bool forever = false) { store_fault_ = {after, forever}; }
    int faults() const { return faults_; }

  private:
    struct countdown {
        int after = -1; // -1: off
        bool forever = false;
    };
    void fault(countdown &c, const char *what) {
        if (c.after < 0) return;
        if (c.after > 0) {
            --c.after;
            return;
        }
        if (!c.forever) c.after = -1;
        ++faults_;
        throw std::runtime_error(std::string("test tier: injected ") + what + " failure: Input/output error");
    }
    countdown load_fault_, store_fault_;
    int faults_ = 0;
    uint64_t bytes_;
    bool host_visible_;
    std::vector<unsigned char> mem_;
};

class fake_store final : public kv::block_store {
  public:
    fake_store(uint64_t block_bytes, uint64_t capacity) : bytes_(block_bytes), cap_(capacity) {}
    bool contains(uint64_t h) const override { return entries_.count(h) != 0; }
    bool put(uint64_t h, std::span<const int32_t> toks, const void *payload) override {
        if (entries_.size() >= cap_) return false;
        auto &e = entries_[h];
        e.tokens.assign(toks.begin(), toks.end());
        e.payload.assign(static_cast<const unsigned char *>(payload), static_cast<const unsigned char *>(payload) + bytes_);
        return true;
    }
    bool get(uint64_t h, std::span<const int32_t> toks, void *payload) override {
        auto it = entries_.find(h);
        if (it == entries_.end() || it->second.corrupt ||
            !std::equal(toks.begin(), toks.end(), it->second.tokens.begin(), it->second.tokens.end())) {
            if (it != entries_.end()) entries_.erase(it);
            return false;
        }
        std::memcpy(payload, it->second.payload.data(), bytes_);
        return true;
    }
    uint64_t entries() const override { return entries_.size(); }
    uint64_t capacity_entries() const override { return cap_; }
    void corrupt_all() {
        for (auto &[h, e] : entries_) e.corrupt = true;
    }

  private:
    struct entry {
        std::vector<int32_t> tokens;
        std::vector<unsigned char> payload;
        bool corrupt = false;
    };
    uint64_t bytes_, cap_;
    std::map<uint64_t, entry> entries_;
};

} // namespace strata::testing
