// find_nonfinite (ABI 1.10): the first block of a row whose scale, minimum or (float formats) value is NaN or
// infinite, as ggml_validate_row_data checks for llama.cpp's --check-tensors. A binary16 is non-finite when its
// exponent bits are all ones; a float32 likewise.
#include "ggml_quants.hpp"

#include <cstring>

namespace strata::quants {
namespace {

bool half_nonfinite(const half_bits &h) { return (static_cast<uint16_t>(h) & 0x7c00u) == 0x7c00u; }
bool bf16_nonfinite(uint16_t h) { return (h & 0x7f80u) == 0x7f80u; }
bool f32_nonfinite(uint32_t u) { return (u & 0x7f800000u) == 0x7f800000u; }

template <class Block, class Bad> int64_t first_bad_block(const void *row, int64_t n, int64_t elems, Bad bad) {
    const auto *b = static_cast<const Block *>(row);
    for (int64_t i = 0; i < n / elems; ++i) {
        if (bad(b[i])) return i * elems;
    }
    return -1;
}

template <class Block> int64_t d_only(const void *row, int64_t n, int64_t elems) {
    return first_bad_block<Block>(row, n, elems, [](const Block &b) { return half_nonfinite(b.d); });
}

template <class Block> int64_t d_and_m(const void *row, int64_t n, int64_t elems) {
    return first_bad_block<Block>(row, n, elems, [](const Block &b) { return half_nonfinite(b.d) || half_nonfinite(b.m); });
}

template <class Block> int64_t d_and_dmin(const void *row, int64_t n) {
    return first_bad_block<Block>(row, n, qk_k,
                                  [](const Block &b) { return half_nonfinite(b.d) || half_nonfinite(b.dmin); });
}

int64_t words16(const void *row, int64_t n, bool (*bad)(uint16_t)) {
    const auto *p = static_cast<const unsigned char *>(row);
    for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        if (bad(h)) return i;
    }
    return -1;
}

} // namespace

int64_t find_nonfinite(uint32_t type, const void *row, int64_t n) {
    switch (type) {
    case ggml_type_f32: {
        const auto *p = static_cast<const unsigned char *>(row);
        for (int64_t i = 0; i < n; ++i) {
            uint32_t u;
            std::memcpy(&u, p + 4 * i, 4);
            if (f32_nonfinite(u)) return i;
        }
        return -1;
    }
    case ggml_type_f16: return words16(row, n, [](uint16_t h) { return (h & 0x7c00u) == 0x7c00u; });
    case ggml_type_bf16: return words16(row, n, bf16_nonfinite);
    case ggml_type_q8_0: return d_only<block_q8_0>(row, n, qk8_0);
    case ggml_type_q4_0: return d_only<block_q4_0>(row, n, qk4_0);
    case ggml_type_q4_1: return d_and_m<block_q4_1>(row, n, qk32);
    case ggml_type_q5_0: return d_only<block_q5_0>(row, n, qk32);
    case ggml_type_q5_1: return d_and_m<block_q5_1>(row, n, qk32);
    case ggml_type_iq4_nl: return d_only<block_iq4_nl>(row, n, qk32);
    case ggml_type_q2_k: return d_and_dmin<block_q2_k>(row, n);
    case ggml_type_q3_k: return d_only<block_q3_k>(row, n, qk_k);
    case ggml_type_q4_k: return d_and_dmin<block_q4_k>(row, n);
    case ggml_type_q5_k: return d_and_dmin<block_q5_k>(row, n);
    case ggml_type_q6_k: return d_only<block_q6_k>(row, n, qk_k);
    case ggml_type_iq4_xs: return d_only<block_iq4_xs>(row, n, qk_k);
    default: return -1;
    }
}

} // namespace strata::quants
