// The paged KV cache's layout (plugin_abi.h, strata_paged_kv), said once: the host sizes its blocks with it, a model
// plugin places each layer with it, and the devices find K and V rows with it. Header-only; usable from CUDA host
// code too.
//
// One block of block_size tokens holds every layer; layer l starts at layer_offset(l) and holds block_size K rows,
// then block_size V rows, each row kv_dim values of the cache's type (strata_kv_type) in row_bytes bytes.
#pragma once

#include <strata/plugin_abi.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>

namespace strata::kv_layout {

// A KV type stores its values in groups: one value per element for the float types, 32 values per 34-byte group
// (a half scale and 32 bytes, strata/kv_q8_0.hpp) for q8_0. Rows hold whole groups, and so does each head of a row.
// Values per group; 0 for a type the cache cannot hold.
constexpr int64_t group_values(uint32_t type) {
    switch (type) {
    case STRATA_KV_F32:
    case STRATA_KV_F16:
    case STRATA_KV_BF16:
    case STRATA_KV_FP8_E4M3:
    case STRATA_KV_FP8_E5M2: return 1;
    case STRATA_KV_Q8_0: return 32;
    default: return 0;
    }
}

// Bytes per group; 0 for a type the cache cannot hold.
constexpr uint64_t group_bytes(uint32_t type) {
    switch (type) {
    case STRATA_KV_F32: return 4;
    case STRATA_KV_F16: return 2;
    case STRATA_KV_BF16: return 2;
    case STRATA_KV_FP8_E4M3: return 1;
    case STRATA_KV_FP8_E5M2: return 1;
    case STRATA_KV_Q8_0: return 34;
    default: return 0;
    }
}

constexpr bool known(uint32_t type) { return group_values(type) > 0; }

// The alignment a block base and a layer offset need: the widest field a device loads (q8_0: its half scale).
constexpr uint64_t alignment(uint32_t type) { return type == STRATA_KV_Q8_0 ? 2 : group_bytes(type); }

// Whether heads of head_dim values are whole groups (every type but q8_0: any head; q8_0: a multiple of 32).
constexpr bool holds_heads_of(uint32_t type, int64_t head_dim) {
    return known(type) && head_dim % group_values(type) == 0;
}

// The type's name as --kv-cache-dtype spells it; nullptr for an unknown type.
constexpr const char *type_name(uint32_t type) {
    switch (type) {
    case STRATA_KV_F32: return "float32";
    case STRATA_KV_F16: return "float16";
    case STRATA_KV_BF16: return "bfloat16";
    case STRATA_KV_FP8_E4M3: return "fp8_e4m3";
    case STRATA_KV_FP8_E5M2: return "fp8_e5m2";
    case STRATA_KV_Q8_0: return "q8_0";
    default: return nullptr;
    }
}

// Every type with its number, for messages that refuse another.
constexpr const char *type_list = "float32 0, float16 1, q8_0 8, bfloat16 30, fp8_e4m3 1040, fp8_e5m2 1041";

// kv_dim values (a multiple of group_values(type)) as bytes.
constexpr uint64_t row_bytes(int64_t kv_dim, uint32_t type) {
    return known(type) ? static_cast<uint64_t>(kv_dim / group_values(type)) * group_bytes(type) : 0;
}

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

// What every device checks of a block table before it uses one, said once: struct_size covers the fields before
// kv_type (a table before ABI 1.20 is float32), sizes positive, seq_block_start present and ascending from >= 0, the
// type one this header knows, whole groups per row, the layer offset aligned for the type. Returns STRATA_OK, or
// STRATA_ERR_UNSUPPORTED for an unknown type and STRATA_ERR_INVALID_ARGUMENT for the rest, with `why` (why_size
// bytes) saying what, naming the fields. The blocks themselves (block_base) are the device's to check for the tokens
// it touches.
inline int32_t check_table(const strata_paged_kv *kv, char *why, size_t why_size) {
    if (kv == nullptr) {
        std::snprintf(why, why_size, "kv (the block table) is NULL");
        return STRATA_ERR_INVALID_ARGUMENT;
    }
    if (kv->struct_size < offsetof(strata_paged_kv, kv_type)) {
        std::snprintf(why, why_size, "kv.struct_size = %u, expected >= %zu", kv->struct_size,
                      offsetof(strata_paged_kv, kv_type));
        return STRATA_ERR_INVALID_ARGUMENT;
    }
    if (kv->block_size <= 0 || kv->kv_dim <= 0 || kv->n_seqs <= 0) {
        std::snprintf(why, why_size, "kv.block_size = %d, kv.kv_dim = %d, kv.n_seqs = %d; all must be > 0",
                      kv->block_size, kv->kv_dim, kv->n_seqs);
        return STRATA_ERR_INVALID_ARGUMENT;
    }
    if (kv->seq_block_start == nullptr) {
        std::snprintf(why, why_size, "kv.seq_block_start is NULL");
        return STRATA_ERR_INVALID_ARGUMENT;
    }
    const uint32_t type = type_of(kv);
    if (!known(type)) {
        std::snprintf(why, why_size, "kv.kv_type = %u is not a KV type this device stores (%s)", type, type_list);
        return STRATA_ERR_UNSUPPORTED;
    }
    if (kv->kv_dim % group_values(type) != 0) {
        std::snprintf(why, why_size, "kv.kv_dim = %d is not a multiple of %lld (a %s group)", kv->kv_dim,
                      static_cast<long long>(group_values(type)), type_name(type));
        return STRATA_ERR_INVALID_ARGUMENT;
    }
    if (kv->layer_offset_bytes % alignment(type) != 0) {
        std::snprintf(why, why_size, "kv.layer_offset_bytes = %llu is not a multiple of %llu (a %s cache's alignment)",
                      static_cast<unsigned long long>(kv->layer_offset_bytes),
                      static_cast<unsigned long long>(alignment(type)), type_name(type));
        return STRATA_ERR_INVALID_ARGUMENT;
    }
    const int32_t *start = kv->seq_block_start;
    if (start[0] < 0) {
        std::snprintf(why, why_size, "kv.seq_block_start[0] = %d; must be >= 0", start[0]);
        return STRATA_ERR_INVALID_ARGUMENT;
    }
    for (int32_t s = 0; s < kv->n_seqs; ++s)
        if (start[s + 1] < start[s]) {
            std::snprintf(why, why_size,
                          "kv.seq_block_start[%d] = %d is less than seq_block_start[%d] = %d; block ranges must ascend",
                          s + 1, start[s + 1], s, start[s]);
            return STRATA_ERR_INVALID_ARGUMENT;
        }
    return STRATA_OK;
}

} // namespace strata::kv_layout
