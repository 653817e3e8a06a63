// The paged KV cache's layout (plugin_abi.h, strata_paged_kv), said once: the host sizes its blocks with it, a model
// plugin places each layer with it, and the devices find K and V rows with it. Header-only; usable from CUDA host
// code too.
//
// One block of block_size tokens holds every layer; layer l starts at layer_offset(l) and holds block_size K rows,
// then block_size V rows, each row kv_dim elements of the cache's type (strata_kv_type).
#pragma once

#include <strata/plugin_abi.h>

#include <cstddef>
#include <cstdint>

namespace strata::kv_layout {

// Bytes of one element of a KV type; 0 for a type the cache cannot hold.
constexpr uint64_t element_bytes(uint32_t type) {
    switch (type) {
    case STRATA_KV_F32: return 4;
    case STRATA_KV_F16: return 2;
    case STRATA_KV_BF16: return 2;
    case STRATA_KV_FP8_E4M3: return 1;
    case STRATA_KV_FP8_E5M2: return 1;
    default: return 0;
    }
}

// The type's name as --kv-cache-dtype spells it; nullptr for an unknown type.
constexpr const char *type_name(uint32_t type) {
    switch (type) {
    case STRATA_KV_F32: return "float32";
    case STRATA_KV_F16: return "float16";
    case STRATA_KV_BF16: return "bfloat16";
    case STRATA_KV_FP8_E4M3: return "fp8_e4m3";
    case STRATA_KV_FP8_E5M2: return "fp8_e5m2";
    default: return nullptr;
    }
}

constexpr uint64_t row_bytes(int64_t kv_dim, uint32_t type) { return static_cast<uint64_t>(kv_dim) * element_bytes(type); }

// One layer's K and V rows within a block.
constexpr uint64_t layer_bytes(int64_t block_size, int64_t kv_dim, uint32_t type) {
    return 2 * static_cast<uint64_t>(block_size) * row_bytes(kv_dim, type);
}

constexpr uint64_t layer_offset(int64_t layer, int64_t block_size, int64_t kv_dim, uint32_t type) {
    return static_cast<uint64_t>(layer) * layer_bytes(block_size, kv_dim, type);
}

// A whole block: every layer.
constexpr uint64_t block_bytes(int64_t n_layer, int64_t block_size, int64_t kv_dim, uint32_t type) {
    return static_cast<uint64_t>(n_layer) * layer_bytes(block_size, kv_dim, type);
}

// From a layer's K rows to its V rows.
constexpr uint64_t v_offset(int64_t block_size, int64_t kv_dim, uint32_t type) {
    return static_cast<uint64_t>(block_size) * row_bytes(kv_dim, type);
}

// The table's element type: kv_type when its struct_size covers the field (ABI 1.20), else float32.
inline uint32_t type_of(const strata_paged_kv *kv) {
    return kv != nullptr && kv->struct_size >= offsetof(strata_paged_kv, kv_type) + sizeof(kv->kv_type) ? kv->kv_type
                                                                                                          : uint32_t{STRATA_KV_F32};
}

// The query's KV type: kv_type when its struct_size covers the field (ABI 1.20), else float32.
inline uint32_t type_of(const strata_support_query *q) {
    return q != nullptr && q->struct_size >= offsetof(strata_support_query, kv_type) + sizeof(q->kv_type) ? q->kv_type
                                                                                                          : uint32_t{STRATA_KV_F32};
}

} // namespace strata::kv_layout
