// The tier descriptor of a RAM tier whose regions live in one host_arena: every slot but create forwards to the
// arena, so pinned_ram and numa_ram differ only in how they obtain the memory. `Tier` is the plugin's own struct
// with a `std::unique_ptr<host_arena> arena` member; its destructor releases the memory.
#pragma once

#include "host_arena.hpp"

#include <strata/plugin.hpp>

#include <cstddef>
#include <cstdio>
#include <unistd.h>

namespace strata::tier {

template <class Tier> struct arena_tier_slots {
    static Tier *self(strata_tier *t) { return reinterpret_cast<Tier *>(t); }
    // Freeing the arena frees every live region with it.
    static void destroy(strata_tier *t) { delete self(t); }
    static uint64_t capacity(strata_tier *t) { return self(t)->arena->capacity(); }
    static int32_t region_alloc(strata_tier *t, uint64_t bytes, uint64_t *region, strata_status *st) {
        return self(t)->arena->alloc(bytes, region, st);
    }
    static void region_free(strata_tier *t, uint64_t region) { self(t)->arena->free(region); }
    static int32_t write(strata_tier *t, uint64_t region, uint64_t offset, const void *src, uint64_t bytes,
                         strata_status *st) {
        return self(t)->arena->write(region, offset, src, bytes, st);
    }
    static int32_t read(strata_tier *t, uint64_t region, uint64_t offset, void *dst, uint64_t bytes, strata_status *st) {
        return self(t)->arena->read(region, offset, dst, bytes, st);
    }
    static void *map(strata_tier *t, uint64_t region) { return self(t)->arena->map(region); }

    using limit_fn = uint64_t (*)(const strata_tier_create_args *, char *, uint32_t);
    static constexpr strata_tier_desc descriptor(const char *name,
                                                 strata_tier *(*create)(const strata_tier_create_args *, strata_status *),
                                                 limit_fn capacity_limit) {
        return strata_tier_desc{
            strata::plugin::make_header<strata_tier_desc>(STRATA_KIND_TIER, name, offsetof(strata_tier_desc, map)),
            create, destroy, capacity, region_alloc, region_free, write, read, map, capacity_limit,
        };
    }
};

// RAM the kernel says is available now: the most a RAM tier can take without pushing the machine into swap.
inline uint64_t available_ram_bytes() {
    const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

} // namespace strata::tier
