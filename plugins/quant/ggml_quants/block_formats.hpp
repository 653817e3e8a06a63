// Byte layouts of ggml's block formats, identical to ggml's block_* structs (GGUF stores them verbatim): the 32-element
// formats Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL and the 256-element super-blocks Q2_K..Q6_K, Q8_K, IQ4_XS.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace strata::quants {

inline constexpr int64_t qk8_0 = 32; // elements per Q8_0 block
inline constexpr int64_t qk4_0 = 32; // elements per Q4_0 block
inline constexpr int64_t qk32 = 32;  // elements per block of every other 32-element format (Q4_1, Q5_x, IQ4_NL)
inline constexpr int64_t qk_k = 256; // elements per super-block of the K-quants and IQ4_XS

// GGUF tensor type ids.
inline constexpr uint32_t ggml_type_f32 = 0;
inline constexpr uint32_t ggml_type_f16 = 1;
inline constexpr uint32_t ggml_type_q4_0 = 2;
inline constexpr uint32_t ggml_type_q4_1 = 3;
inline constexpr uint32_t ggml_type_q5_0 = 6;
inline constexpr uint32_t ggml_type_q5_1 = 7;
inline constexpr uint32_t ggml_type_q8_0 = 8;
inline constexpr uint32_t ggml_type_q2_k = 10;
inline constexpr uint32_t ggml_type_q3_k = 11;
inline constexpr uint32_t ggml_type_q4_k = 12;
inline constexpr uint32_t ggml_type_q5_k = 13;
inline constexpr uint32_t ggml_type_q6_k = 14;
inline constexpr uint32_t ggml_type_q8_k = 15;
inline constexpr uint32_t ggml_type_iq4_nl = 20;
inline constexpr uint32_t ggml_type_iq4_xs = 23;
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

// Q4_1: x ~= d * nibble + m (nibble order as Q4_0).
struct block_q4_1 {
    half_bits d, m;
    uint8_t qs[qk32 / 2];
};
static_assert(sizeof(block_q4_1) == 20);

// Q5_0: x ~= d * (q - 16), q = nibble | (bit j of qh) << 4 for element j (elements 16..31: high nibbles, bits 16..31).
struct block_q5_0 {
    half_bits d;
    uint8_t qh[4]; // little-endian uint32: the fifth bit of each element
    uint8_t qs[qk32 / 2];
};
static_assert(sizeof(block_q5_0) == 22);

// Q5_1: x ~= d * q + m, q as Q5_0's.
struct block_q5_1 {
    half_bits d, m;
    uint8_t qh[4];
    uint8_t qs[qk32 / 2];
};
static_assert(sizeof(block_q5_1) == 24);

// IQ4_NL: x ~= d * kvalues_iq4nl[nibble] (nibble order as Q4_0).
struct block_iq4_nl {
    half_bits d;
    uint8_t qs[qk32 / 2];
};
static_assert(sizeof(block_iq4_nl) == 18);

// The non-linear 4-bit grid of IQ4_NL and IQ4_XS.
inline constexpr int8_t kvalues_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// Q2_K: 16 groups of 16; scales[g] holds the group's 4-bit scale (low) and 4-bit min (high):
// x ~= d * (scales & 15) * q - dmin * (scales >> 4), q the 2-bit value.
struct block_q2_k {
    uint8_t scales[qk_k / 16];
    uint8_t qs[qk_k / 4];
    half_bits d, dmin;
};
static_assert(sizeof(block_q2_k) == 84);

// Q3_K: 16 groups of 16; x ~= d * (scale - 32) * (q2 - (hmask bit ? 0 : 4)), 6-bit scales packed in 12 bytes.
struct block_q3_k {
    uint8_t hmask[qk_k / 8];
    uint8_t qs[qk_k / 4];
    uint8_t scales[12];
    half_bits d;
};
static_assert(sizeof(block_q3_k) == 110);

// Q4_K: 8 groups of 32; x ~= d * scale * q - dmin * min, 6-bit scales and mins packed in 12 bytes.
struct block_q4_k {
    half_bits d, dmin;
    uint8_t scales[12];
    uint8_t qs[qk_k / 2];
};
static_assert(sizeof(block_q4_k) == 144);

// Q5_K: Q4_K with a fifth bit per element in qh.
struct block_q5_k {
    half_bits d, dmin;
    uint8_t scales[12];
    uint8_t qh[qk_k / 8];
    uint8_t qs[qk_k / 2];
};
static_assert(sizeof(block_q5_k) == 176);

// Q6_K: 16 groups of 16; x ~= d * scales[g] * (q - 32), q 6 bits (4 in ql, 2 in qh).
struct block_q6_k {
    uint8_t ql[qk_k / 2];
    uint8_t qh[qk_k / 4];
    int8_t scales[qk_k / 16];
    half_bits d;
};
static_assert(sizeof(block_q6_k) == 210);

// IQ4_XS: 8 groups of 32; x ~= d * (ls - 32) * kvalues_iq4nl[nibble], ls 6 bits (4 in scales_l, 2 in scales_h).
struct block_iq4_xs {
    half_bits d;
    uint8_t scales_h[2]; // little-endian uint16
    uint8_t scales_l[qk_k / 64];
    uint8_t qs[qk_k / 2];
};
static_assert(sizeof(block_iq4_xs) == 136);

// Q8_K: ggml's activation format for the K-quant dots (a float scale, 256 quants and the sums of each 16). Also
// the activation block of this plugin's K-quant integer path (that buffer is 4-byte aligned: 292-byte blocks from
// a 16-byte aligned base).
struct block_q8_k {
    float d;
    int8_t qs[qk_k];
    int16_t bsums[qk_k / 16];
};
static_assert(sizeof(block_q8_k) == 292);

static_assert(alignof(block_q8_0) == 1 && alignof(block_q4_0) == 1 && alignof(block_q4_1) == 1 &&
                  alignof(block_q5_0) == 1 && alignof(block_q5_1) == 1 && alignof(block_iq4_nl) == 1 &&
                  alignof(block_q2_k) == 1 && alignof(block_q3_k) == 1 && alignof(block_q4_k) == 1 &&
                  alignof(block_q5_k) == 1 && alignof(block_q6_k) == 1 && alignof(block_iq4_xs) == 1,
              "weight blocks must be readable at any address");

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

// The same quants and scale for the formats with an additive min (Q4_1, Q5_1), whose block dot adds m * d * sum(qs):
// the sum comes already scaled (ggml's block_q8_1 keeps d * sum as its `s` for the same reason), so a block's min
// term is one FMA. Written by converting block_q8_act's sum in place (scale_activation_sums).
struct block_q8_act_sum {
    int8_t qs[qk8_0];
    float d;
    float s; // d * (sum of qs), one rounding
};
static_assert(sizeof(block_q8_act_sum) == sizeof(block_q8_act) && offsetof(block_q8_act_sum, d) == offsetof(block_q8_act, d) &&
                  offsetof(block_q8_act_sum, s) == offsetof(block_q8_act, sum_x8),
              "block_q8_act_sum is block_q8_act with its last field converted");

} // namespace strata::quants
