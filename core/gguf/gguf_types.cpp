// Type tables: the ggml tensor types (elements and bytes per block) and the names of GGUF value types.
// Block layouts follow ggml-common.h (QK_K = 256 for the K and IQ families).
#include "gguf/gguf_file.hpp"

#include <iterator>

namespace strata::gguf {

namespace {

constexpr uint32_t qk_k = 256;

// Indexed by ggml type id; retired ids (4, 5, 31-33, 36-38) have a null name.
constexpr type_traits type_table[] = {
    {"F32", 1, 4},            // 0
    {"F16", 1, 2},            // 1
    {"Q4_0", 32, 2 + 16},     // 2
    {"Q4_1", 32, 4 + 16},     // 3
    {nullptr, 0, 0},          // 4: Q4_2, removed
    {nullptr, 0, 0},          // 5: Q4_3, removed
    {"Q5_0", 32, 2 + 4 + 16}, // 6
    {"Q5_1", 32, 4 + 4 + 16}, // 7
    {"Q8_0", 32, 2 + 32},     // 8
    {"Q8_1", 32, 4 + 32},     // 9
    {"Q2_K", qk_k, qk_k / 16 + qk_k / 4 + 4},                     // 10: 84
    {"Q3_K", qk_k, qk_k / 8 + qk_k / 4 + 12 + 2},                 // 11: 110
    {"Q4_K", qk_k, 4 + 12 + qk_k / 2},                            // 12: 144
    {"Q5_K", qk_k, 4 + 12 + qk_k / 8 + qk_k / 2},                 // 13: 176
    {"Q6_K", qk_k, qk_k / 2 + qk_k / 4 + qk_k / 16 + 2},          // 14: 210
    {"Q8_K", qk_k, 4 + qk_k + qk_k / 16 * 2},                     // 15: 292
    {"IQ2_XXS", qk_k, 2 + qk_k / 4},                              // 16: 66
    {"IQ2_XS", qk_k, 2 + qk_k / 4 + qk_k / 32},                   // 17: 74
    {"IQ3_XXS", qk_k, 2 + 3 * qk_k / 8},                          // 18: 98
    {"IQ1_S", qk_k, 2 + qk_k / 8 + qk_k / 16},                    // 19: 50
    {"IQ4_NL", 32, 2 + 16},                                       // 20: 18
    {"IQ3_S", qk_k, 2 + qk_k / 4 + qk_k / 32 + qk_k / 8 + qk_k / 64}, // 21: 110
    {"IQ2_S", qk_k, 2 + qk_k / 4 + qk_k / 32 + qk_k / 32},        // 22: 82
    {"IQ4_XS", qk_k, 2 + 2 + qk_k / 64 + qk_k / 2},               // 23: 136
    {"I8", 1, 1},             // 24
    {"I16", 1, 2},            // 25
    {"I32", 1, 4},            // 26
    {"I64", 1, 8},            // 27
    {"F64", 1, 8},            // 28
    {"IQ1_M", qk_k, qk_k / 8 + qk_k / 16 + qk_k / 32},            // 29: 56
    {"BF16", 1, 2},           // 30
    {nullptr, 0, 0},          // 31: Q4_0_4_4, removed
    {nullptr, 0, 0},          // 32: Q4_0_4_8, removed
    {nullptr, 0, 0},          // 33: Q4_0_8_8, removed
    {"TQ1_0", qk_k, (qk_k - 4 * qk_k / 64) / 5 + qk_k / 64 + 2},  // 34: 54
    {"TQ2_0", qk_k, qk_k / 4 + 2},                                // 35: 66
    {nullptr, 0, 0},          // 36: IQ4_NL_4_4, removed
    {nullptr, 0, 0},          // 37: IQ4_NL_4_8, removed
    {nullptr, 0, 0},          // 38: IQ4_NL_8_8, removed
    {"MXFP4", 32, 1 + 16},    // 39: 17
};

// Strata's own formats from first_strata_type (plugin_abi.h's STRATA_TYPE_*): the group integers (f16 scale, u8
// zero, 0, integers), then FP8.
constexpr type_traits strata_table[] = {
    {"Q4_G32", 32, 4 + 16},   // 1024
    {"Q4_G64", 64, 4 + 32},   // 1025
    {"Q4_G128", 128, 4 + 64}, // 1026
    {"Q8_G32", 32, 4 + 32},   // 1027
    {"Q8_G64", 64, 4 + 64},   // 1028
    {"Q8_G128", 128, 4 + 128}, // 1029
    // f32 scale, then e4m3 bytes
    {"F8_E4M3_B32", 32, 4 + 32},    // 1030
    {"F8_E4M3_B128", 128, 4 + 128}, // 1031
};

static_assert(type_table[15].block_bytes == 292 && type_table[21].block_bytes == 110 &&
              type_table[29].block_bytes == 56 && type_table[34].block_bytes == 54);

} // namespace

const type_traits *ggml_type_traits(uint32_t ggml_type) {
    if (ggml_type >= first_strata_type) {
        const uint32_t i = ggml_type - first_strata_type;
        return i < std::size(strata_table) ? &strata_table[i] : nullptr;
    }
    if (ggml_type >= std::size(type_table) || type_table[ggml_type].name == nullptr) return nullptr;
    return &type_table[ggml_type];
}

const char *value_type_name(value_type t) {
    switch (t) {
    case value_type::u8: return "u8";
    case value_type::i8: return "i8";
    case value_type::u16: return "u16";
    case value_type::i16: return "i16";
    case value_type::u32: return "u32";
    case value_type::i32: return "i32";
    case value_type::f32: return "f32";
    case value_type::boolean: return "bool";
    case value_type::string: return "string";
    case value_type::array: return "array";
    case value_type::u64: return "u64";
    case value_type::i64: return "i64";
    case value_type::f64: return "f64";
    }
    return "unknown";
}

} // namespace strata::gguf
