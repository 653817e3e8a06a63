// Byte layouts of ggml's block formats, identical to ggml's block_q8_0 / block_q4_0 (GGUF stores them verbatim).
#pragma once

#include <cstdint>
#include <cstring>

namespace strata::quants {

inline constexpr int64_t qk8_0 = 32; // elements per Q8_0 block
inline constexpr int64_t qk4_0 = 32; // elements per Q4_0 block

// GGUF tensor type ids.
inline constexpr uint32_t ggml_type_f32 = 0;
inline constexpr uint32_t ggml_type_f16 = 1;
inline constexpr uint32_t ggml_type_q4_0 = 2;
inline constexpr uint32_t ggml_type_q8_0 = 8;
inline constexpr uint32_t ggml_type_bf16 = 30;

// A binary16 scale stored as its two bytes. Alignment 1, so a block may sit at any address: the ABI guarantees rows
// only byte alignment, and reading a uint16_t member through a misaligned block would be undefined behaviour.
struct half_bits {
    unsigned char bytes[2];
    operator uint16_t() const {
        uint16_t v;
        std::memcpy(&v, bytes, sizeof v);
        return v;
    }
    half_bits &operator=(uint16_t v) {
        std::memcpy(bytes, &v, sizeof v);
        return *this;
    }
};

// Q8_0: x[j] ~= d * qs[j].
struct block_q8_0 {
    half_bits d; // binary16 scale
    int8_t qs[qk8_0];
};
static_assert(sizeof(block_q8_0) == 34, "Q8_0 block must be 34 bytes like ggml's");

// Q4_0: byte j holds element j in its low nibble and element j+16 in its high nibble; x ~= d * (nibble - 8).
struct block_q4_0 {
    half_bits d; // binary16 scale
    uint8_t qs[qk4_0 / 2];
};
static_assert(sizeof(block_q4_0) == 18, "Q4_0 block must be 18 bytes like ggml's");
static_assert(alignof(block_q8_0) == 1 && alignof(block_q4_0) == 1, "weight blocks must be readable at any address");

// Activations quantized for the integer dot path (not a GGUF format; private to this plugin and the devices that
// call it through quantize_activations/dot_act). The values are ggml's Q8_0 (quantize_row_q8_0_ref, bit for bit:
// x[j] ~= d * qs[j] with d the binary16-rounded scale), in a layout cheaper to consume: d already widened to float
// (exactly the value of the binary16 scale ggml stores) and 8 times the sum of the quants, which lets the Q4_0 kernel
// apply its -8 offset as one integer subtraction per block instead of one per element.
struct block_q8_act {
    int8_t qs[qk8_0];
    float d;
    int32_t sum_x8; // 8 * (sum of qs): what Q4_0's -8 offset takes off a block's integer dot
};
static_assert(sizeof(block_q8_act) == 40, "activation block must stay packed (40 bytes)");

} // namespace strata::quants
