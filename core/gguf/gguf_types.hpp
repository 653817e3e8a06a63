// The GGUF vocabulary every model file is read in: metadata value types, ggml tensor types and the tensor record.
// Other formats (HF safetensors folders) map their metadata and tensors into these.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace strata::gguf {

enum class value_type : uint32_t {
    u8 = 0,
    i8 = 1,
    u16 = 2,
    i16 = 3,
    u32 = 4,
    i32 = 5,
    f32 = 6,
    boolean = 7,
    string = 8,
    array = 9,
    u64 = 10,
    i64 = 11,
    f64 = 12
};

// "u32", "string", ...; "unknown" for values outside the enum.
const char *value_type_name(value_type t);

// Storage of one ggml tensor type: a row of ne[0] elements is ne[0] / block_elems blocks of block_bytes each.
struct type_traits {
    const char *name;
    uint32_t block_elems;
    uint32_t block_bytes;
};

// Strata's own formats (plugin_abi.h's STRATA_TYPE_*, the repacked GPTQ / AWQ groups) start here; no GGUF file
// holds them, and the GGUF reader and writer refuse them.
inline constexpr uint32_t first_strata_type = 1024;

// ggml tensor type table (F32=0, F16=1, Q4_0=2, Q4_1=3, Q5_0=6, Q5_1=7, Q8_0=8, Q8_1=9, Q2_K..Q8_K=10..15,
// IQ*, I8..I64=24..27, F64=28, BF16=30, TQ1_0/TQ2_0=34/35, MXFP4=39) and Strata's own from first_strata_type;
// nullptr when unknown or retired.
const type_traits *ggml_type_traits(uint32_t ggml_type);

struct tensor_info {
    std::string name;
    uint32_t n_dims = 0;
    std::array<int64_t, 4> ne{1, 1, 1, 1}; // ne[0] = row length; dimensions past n_dims are 1
    uint32_t type = 0;                     // ggml type
    uint64_t offset = 0;                   // within the data section
    const uint8_t *data = nullptr;         // points into the mapped/borrowed buffer
    uint64_t n_bytes = 0;
    // Strata's repacked GPTQ act-order weights (never GGUF): ne[0] int32 values follow the rows inside n_bytes, the
    // order in which the columns meet the activations (strata_tensor_view.input_order).
    bool input_order = false;
    int64_t n_elements() const;
    uint64_t input_order_bytes() const { return input_order ? static_cast<uint64_t>(ne[0]) * sizeof(int32_t) : 0; }
};

} // namespace strata::gguf
