// The on-disk form of one prefix-store entry: a fixed header, the block's token ids, then the KV payload.
//
//   offset 0   entry_header (48 bytes, host byte order: little-endian only, checked at compile time)
//   offset 48  block_size int32 token ids
//   then       payload_bytes bytes of KV data
//
// Every header field is compared with what the reader expects (nothing in it is trusted to size a read), and the
// file size must be exactly header + tokens + payload.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstdio>

namespace strata::kv {

static_assert(std::endian::native == std::endian::little, "prefix store entries are written little-endian");

inline constexpr char k_entry_magic[8] = {'S', 'T', 'R', 'A', 'T', 'A', 'K', 'V'};
inline constexpr uint32_t k_entry_version = 1;
inline constexpr int32_t k_max_block_size = 1 << 16; // tokens per block a store accepts

struct entry_header {
    char magic[8];
    uint32_t version;
    int32_t block_size;
    uint64_t model_fingerprint;
    uint64_t hash;              // the block's chained prefix hash; also the file's name
    uint64_t payload_bytes;
    uint64_t payload_checksum;  // XXH3-64 of the payload
};
static_assert(sizeof(entry_header) == 48 && offsetof(entry_header, payload_checksum) == 40);

inline constexpr uint64_t entry_tokens_offset() { return sizeof(entry_header); }
inline constexpr uint64_t entry_payload_offset(int32_t block_size) {
    return sizeof(entry_header) + sizeof(int32_t) * static_cast<uint64_t>(block_size);
}
inline constexpr uint64_t entry_file_bytes(int32_t block_size, uint64_t payload_bytes) {
    return entry_payload_offset(block_size) + payload_bytes;
}

// File names: "<16 lowercase hex digits>.kvb"; a write in progress is "<hex>.kvb.<n>.tmp".
inline constexpr size_t k_entry_name_len = 16 + 4;
struct entry_name {
    char text[64];
};
inline entry_name entry_file_name(uint64_t hash) {
    entry_name n;
    std::snprintf(n.text, sizeof n.text, "%016llx.kvb", static_cast<unsigned long long>(hash));
    return n;
}
inline entry_name temp_file_name(uint64_t hash, uint64_t serial) {
    entry_name n;
    std::snprintf(n.text, sizeof n.text, "%016llx.kvb.%llu.tmp", static_cast<unsigned long long>(hash),
                  static_cast<unsigned long long>(serial));
    return n;
}

} // namespace strata::kv
