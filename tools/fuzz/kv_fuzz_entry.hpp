// The one entry fuzz_kv_entry reads and make_kv_fuzz_seed writes: both must agree on every constant.
#pragma once

#include <array>
#include <cstdint>

namespace strata::kv_fuzz {

inline constexpr uint64_t k_fingerprint = 0x5eed;
inline constexpr char k_fingerprint_folder[] = "0000000000005eed";
inline constexpr uint64_t k_hash = 0x0123456789abcdefULL;
inline constexpr char k_entry_name[] = "0123456789abcdef.kvb";
inline constexpr int32_t k_block_size = 4;
inline constexpr uint64_t k_block_bytes = 64;
inline constexpr std::array<int32_t, k_block_size> k_tokens = {1, 22, 333, 4444};

} // namespace strata::kv_fuzz
