#include "engine/model_fingerprint.hpp"

#include <strata/plugin_abi.h>
#include <xxhash.h>

#include <algorithm>

namespace strata::engine {

uint64_t model_fingerprint(const model_file &file) {
    XXH3_state_t *st = XXH3_createState();
    XXH3_64bits_reset(st);
    const uint64_t size = file.file_size();
    XXH3_64bits_update(st, &size, sizeof size);
    for (size_t i = 0; i < file.kv_count(); ++i) {
        const std::string_view k = file.kv_key(i);
        XXH3_64bits_update(st, k.data(), k.size());
        const std::string v = file.kv_summary(i, 256);
        XXH3_64bits_update(st, v.data(), v.size());
    }
    // A sample of every tensor: its name, type and size, its first and last 4 KiB (two pages of the mmap each).
    for (const auto &t : file.tensors()) {
        XXH3_64bits_update(st, t.name.data(), t.name.size());
        XXH3_64bits_update(st, &t.type, sizeof t.type);
        XXH3_64bits_update(st, &t.n_bytes, sizeof t.n_bytes);
        const auto *bytes = static_cast<const unsigned char *>(t.data);
        const uint64_t head = std::min<uint64_t>(t.n_bytes, 4096);
        XXH3_64bits_update(st, bytes, head);
        if (t.n_bytes > head) XXH3_64bits_update(st, bytes + t.n_bytes - std::min<uint64_t>(t.n_bytes - head, 4096),
                                                 std::min<uint64_t>(t.n_bytes - head, 4096));
    }
    const uint64_t h = XXH3_64bits_digest(st);
    XXH3_freeState(st);
    return h;
}

namespace {

// splitmix64's finaliser over a fingerprint and a value: distinct values give unrelated results.
uint64_t mix(uint64_t h, uint64_t v) {
    uint64_t z = h ^ (0x9e3779b97f4a7c15ull * (v + 1));
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

} // namespace

uint64_t kv_fingerprint(uint64_t model, uint32_t kv_type, int32_t tensor_parallel_size) {
    const uint64_t typed = kv_type == STRATA_KV_F32 ? model : mix(model, kv_type);
    // A tensor-parallel block is its ranks' head shares one after another, not one layer's heads together.
    return tensor_parallel_size > 1 ? mix(typed ^ 0x7470u, static_cast<uint64_t>(tensor_parallel_size)) : typed;
}

} // namespace strata::engine
