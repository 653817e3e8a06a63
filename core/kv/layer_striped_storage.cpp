#include "kv/layer_striped_storage.hpp"

#include "common/error.hpp"

#include <utility>

namespace strata::kv {

layer_striped_storage::layer_striped_storage(std::vector<part> parts) : parts_(std::move(parts)) {
    if (parts_.empty()) fail("internal: a layer-striped KV pool needs at least one part");
    for (const part &p : parts_)
        if (!p.storage || p.block_bytes == 0) fail("internal: a layer-striped KV pool has an empty part");
}

void layer_striped_storage::load(uint32_t i, void *host_dst) {
    auto *dst = static_cast<unsigned char *>(host_dst);
    for (part &p : parts_) {
        p.storage->load(i, dst);
        dst += p.block_bytes;
    }
}

void layer_striped_storage::store(uint32_t i, const void *host_src) {
    const auto *src = static_cast<const unsigned char *>(host_src);
    for (part &p : parts_) {
        p.storage->store(i, src);
        src += p.block_bytes;
    }
}

} // namespace strata::kv
