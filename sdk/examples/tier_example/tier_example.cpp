// Example tier plugin: keeps bytes in ordinary heap memory. It is small but real — the planner could use it — and
// shows the rules every tier follows: a capacity budget, exhaustion reported as STRATA_ERR_OUT_OF_MEMORY, bounds
// checks on every copy, and thread safety.
#include <strata/plugin.hpp>

#include <cstddef>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <unordered_map>

namespace {

constexpr const char *plugin_name = "example_tier";

struct region {
    std::unique_ptr<unsigned char[]> bytes;
    uint64_t size = 0;
};

struct tier {
    uint64_t capacity = 0; // the budget the planner gave us
    bool zero_fill = true;
    std::mutex mutex; // guards everything below; copies happen under it too, which keeps the example simple
    uint64_t used = 0;
    uint64_t next_id = 1; // region ids are never reused, so a stale id is reported instead of aliasing
    std::unordered_map<uint64_t, region> regions;
};

tier *as_tier(strata_tier *t) { return reinterpret_cast<tier *>(t); }

strata_tier *create(const strata_tier_create_args *args, strata_status *st) {
    if (args == nullptr || args->capacity_bytes == 0) {
        strata::plugin::fail(st, STRATA_ERR_INVALID_ARGUMENT, "example_tier: capacity_bytes must be > 0");
        return nullptr;
    }
    tier *t = new (std::nothrow) tier;
    if (t == nullptr) {
        strata::plugin::fail(st, STRATA_ERR_OUT_OF_MEMORY, "example_tier: out of memory");
        return nullptr;
    }
    t->capacity = args->capacity_bytes;
    t->zero_fill = strata::plugin::config(args->config).get_bool("zero_fill").value_or(true);
    strata::plugin::log(args->host, STRATA_LOG_DEBUG, plugin_name, "created with %llu bytes",
                        static_cast<unsigned long long>(t->capacity));
    strata::plugin::ok(st);
    return reinterpret_cast<strata_tier *>(t); // caller owns; frees with destroy
}

// Frees every region still live: the host may destroy a tier without freeing regions one by one.
void destroy(strata_tier *t) { delete as_tier(t); }

uint64_t capacity(strata_tier *t) { return as_tier(t)->capacity; }

int32_t region_alloc(strata_tier *handle, uint64_t bytes, uint64_t *out_region, strata_status *st) {
    tier *t = as_tier(handle);
    if (bytes == 0 || out_region == nullptr) {
        return strata::plugin::fail(st, STRATA_ERR_INVALID_ARGUMENT, "example_tier: region of 0 bytes");
    }
    // guarded: the map insert can throw bad_alloc, and no exception may cross the C ABI.
    return strata::plugin::guarded(st, [&]() -> int32_t {
        std::lock_guard<std::mutex> lock(t->mutex);
        if (bytes > t->capacity - t->used) {
            return strata::plugin::fail(st, STRATA_ERR_OUT_OF_MEMORY,
                                        "example_tier: %llu bytes requested, %llu of %llu free",
                                        static_cast<unsigned long long>(bytes),
                                        static_cast<unsigned long long>(t->capacity - t->used),
                                        static_cast<unsigned long long>(t->capacity));
        }
        region r;
        r.bytes.reset(t->zero_fill ? new (std::nothrow) unsigned char[bytes]() : new (std::nothrow) unsigned char[bytes]);
        if (!r.bytes) return strata::plugin::fail(st, STRATA_ERR_OUT_OF_MEMORY, "example_tier: heap exhausted");
        r.size = bytes;
        const uint64_t id = t->next_id++;
        t->regions.emplace(id, std::move(r));
        t->used += bytes;
        *out_region = id; // written only on success, as the ABI asks
        strata::plugin::ok(st);
        return STRATA_OK;
    });
}

void region_free(strata_tier *handle, uint64_t id) {
    tier *t = as_tier(handle);
    std::lock_guard<std::mutex> lock(t->mutex);
    auto it = t->regions.find(id);
    if (it == t->regions.end()) return; // release functions never fail; an unknown id is a no-op
    t->used -= it->second.size;
    t->regions.erase(it);
}

// Finds the region and checks [offset, offset + bytes) lies inside it without overflowing. Caller holds the mutex.
unsigned char *checked_span(tier *t, uint64_t id, uint64_t offset, uint64_t bytes, strata_status *st) {
    auto it = t->regions.find(id);
    if (it == t->regions.end()) {
        strata::plugin::fail(st, STRATA_ERR_NOT_FOUND, "example_tier: no region %llu", static_cast<unsigned long long>(id));
        return nullptr;
    }
    const uint64_t size = it->second.size;
    if (offset > size || bytes > size - offset) {
        strata::plugin::fail(st, STRATA_ERR_INVALID_ARGUMENT,
                             "example_tier: bytes [%llu, %llu + %llu) are outside region %llu of %llu bytes",
                             static_cast<unsigned long long>(offset), static_cast<unsigned long long>(offset),
                             static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(id),
                             static_cast<unsigned long long>(size));
        return nullptr;
    }
    return it->second.bytes.get() + offset;
}

int32_t region_write(strata_tier *handle, uint64_t id, uint64_t offset, const void *src, uint64_t bytes, strata_status *st) {
    tier *t = as_tier(handle);
    std::lock_guard<std::mutex> lock(t->mutex);
    unsigned char *dst = checked_span(t, id, offset, bytes, st);
    if (dst == nullptr) return st != nullptr ? st->code : STRATA_ERR_INVALID_ARGUMENT;
    if (bytes > 0) std::memcpy(dst, src, static_cast<size_t>(bytes));
    strata::plugin::ok(st);
    return STRATA_OK;
}

int32_t region_read(strata_tier *handle, uint64_t id, uint64_t offset, void *dst, uint64_t bytes, strata_status *st) {
    tier *t = as_tier(handle);
    std::lock_guard<std::mutex> lock(t->mutex);
    const unsigned char *src = checked_span(t, id, offset, bytes, st);
    if (src == nullptr) return st != nullptr ? st->code : STRATA_ERR_INVALID_ARGUMENT;
    if (bytes > 0) std::memcpy(dst, src, static_cast<size_t>(bytes));
    strata::plugin::ok(st);
    return STRATA_OK;
}

// Optional slot: heap memory is CPU-addressable, so devices may compute on it in place. The pointer stays valid
// until the region is freed.
void *region_map(strata_tier *handle, uint64_t id) {
    tier *t = as_tier(handle);
    std::lock_guard<std::mutex> lock(t->mutex);
    auto it = t->regions.find(id);
    return it == t->regions.end() ? nullptr : it->second.bytes.get();
}

const strata_tier_desc &descriptor() {
    static const strata_tier_desc desc = [] {
        strata_tier_desc d{};
        d.header = strata::plugin::make_header<strata_tier_desc>(STRATA_KIND_TIER, "example",
                                                                 offsetof(strata_tier_desc, map));
        // --- required ---
        d.create = &create;
        d.destroy = &destroy;
        d.capacity = &capacity;
        d.region_alloc = &region_alloc;
        d.region_free = &region_free;
        d.write = &region_write;
        d.read = &region_read;
        // --- optional ---
        d.map = &region_map;
        return d;
    }();
    return desc;
}

const strata_config_key config_keys[] = {
    {"zero_fill", STRATA_CONFIG_BOOL, "true", 0, 0, "zero new regions (off: faster, contents undefined)", nullptr,
     nullptr},
};

const strata_plugin_info &plugin_info() {
    static const strata_descriptor_header *const descriptors[] = {&descriptor().header};
    // make_info takes the counts from the arrays and the ABI version from the SDK it is built against.
    static const strata_plugin_info info = strata::plugin::make_info(plugin_name, "0.1.0", "MIT", "SDK example: heap-backed memory tier", descriptors, config_keys);
    return info;
}

} // namespace

STRATA_PLUGIN_DEFINE(plugin_info())
