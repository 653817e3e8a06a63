// The part every CPU-addressable tier shares (pinned_ram, numa_ram): regions carved out of one arena that the
// plugin obtained its own way, copies in and out with memcpy, and map() returning the region's address.
//
// The arena aligns regions to 4096 bytes so a copy between this tier and the nvme tier can take its O_DIRECT path
// (page-aligned buffer, page-aligned size) without a staging copy; the waste is below one page per region, which
// is nothing next to weight tensors.
#pragma once

#include "byte_text.hpp"
#include "region_allocator.hpp"

#include <strata/plugin.hpp>

#include <cstring>

namespace strata::tier {

inline constexpr uint64_t host_arena_alignment = 4096;

class host_arena {
  public:
    // `base` points at `capacity` bytes the owner keeps alive (and frees) for the arena's lifetime.
    host_arena(const char *plugin_name, unsigned char *base, uint64_t capacity)
        : name_(plugin_name), base_(base), regions_(capacity, host_arena_alignment) {}

    uint64_t capacity() const { return regions_.capacity(); }

    int32_t alloc(uint64_t bytes, uint64_t *region, strata_status *st) {
        if (region == nullptr) return plugin::fail(st, STRATA_ERR_INVALID_ARGUMENT, "%s: region_alloc: region is NULL", name_);
        if (bytes == 0) return plugin::fail(st, STRATA_ERR_INVALID_ARGUMENT, "%s: region_alloc: a region of 0 bytes", name_);
        return plugin::guarded(st, [&]() -> int32_t {
            const auto a = regions_.allocate(bytes);
            if (!a) {
                const arena_usage u = regions_.usage();
                return plugin::fail(st, STRATA_ERR_OUT_OF_MEMORY,
                                    "%s: cannot allocate a region of %s: %s of %s free, largest free block %s "
                                    "(raise this tier's budget or free regions first)",
                                    name_, byte_text(bytes).c_str(), byte_text(u.free_bytes).c_str(),
                                    byte_text(u.capacity).c_str(), byte_text(u.largest_free).c_str());
            }
            *region = a->id;
            plugin::ok(st);
            return STRATA_OK;
        });
    }

    void free(uint64_t region) { (void)regions_.release(region); }

    int32_t write(uint64_t region, uint64_t offset, const void *src, uint64_t bytes, strata_status *st) {
        unsigned char *p = span(region, offset, bytes, src != nullptr, "write", st);
        if (p == nullptr) return st != nullptr ? st->code : STRATA_ERR_INVALID_ARGUMENT;
        if (bytes > 0) std::memcpy(p, src, static_cast<size_t>(bytes));
        plugin::ok(st);
        return STRATA_OK;
    }

    int32_t read(uint64_t region, uint64_t offset, void *dst, uint64_t bytes, strata_status *st) {
        const unsigned char *p = span(region, offset, bytes, dst != nullptr, "read", st);
        if (p == nullptr) return st != nullptr ? st->code : STRATA_ERR_INVALID_ARGUMENT;
        if (bytes > 0) std::memcpy(dst, p, static_cast<size_t>(bytes));
        plugin::ok(st);
        return STRATA_OK;
    }

    // Valid until the region is freed or the tier destroyed.
    void *map(uint64_t region) const {
        const auto e = regions_.find(region);
        return e ? base_ + e->offset : nullptr;
    }

  private:
    // The address of [offset, offset + bytes) inside the region, or NULL with the status filled.
    unsigned char *span(uint64_t region, uint64_t offset, uint64_t bytes, bool have_buffer, const char *op,
                        strata_status *st) const {
        const auto e = regions_.find(region);
        if (!e) {
            plugin::fail(st, STRATA_ERR_NOT_FOUND, "%s: %s: no region %llu (never allocated, or already freed)", name_,
                         op, static_cast<unsigned long long>(region));
            return nullptr;
        }
        if (offset > e->size || bytes > e->size - offset) {
            plugin::fail(st, STRATA_ERR_INVALID_ARGUMENT,
                         "%s: %s of %llu bytes at offset %llu is outside region %llu of %llu bytes", name_, op,
                         static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(offset),
                         static_cast<unsigned long long>(region), static_cast<unsigned long long>(e->size));
            return nullptr;
        }
        if (!have_buffer && bytes > 0) {
            plugin::fail(st, STRATA_ERR_INVALID_ARGUMENT, "%s: %s: buffer is NULL", name_, op);
            return nullptr;
        }
        return base_ + e->offset + offset;
    }

    const char *name_;
    unsigned char *base_;
    region_allocator regions_;
};

} // namespace strata::tier
