// Strata's group-integer weight formats: the layouts GPTQ and AWQ checkpoints are repacked into at load (once; the
// weights stay 4 or 8 bits on every tier). A row of `cols` elements is cols / G blocks; a block holds one
// quantization group of G consecutive input elements with its scale and integer zero point, as GPTQ and AWQ define
// the group: w = scale * (q - zero), q and zero unsigned (0..15 or 0..255).
//
//   4 bits: f16 scale, u8 zero, u8 0, then G / 2 bytes: for each 32 elements, byte j holds element j in its low
//           nibble and element j + 16 in its high nibble (ggml's Q4_0 order, so SIMD unpacks 32 at once);
//   8 bits: f16 scale, u8 zero, u8 0, then G bytes, element i in byte i.
//
// Type ids are STRATA_TYPE_Q{4,8}_G{32,64,128} (plugin_abi.h). Every row function takes n a multiple of G and reads
// or writes whole blocks only; none allocates; all are thread-safe.
#pragma once

#include <strata/float16.hpp>
#include <strata/plugin_abi.h>

#include <cstdint>
#include <cstring>

namespace strata::group_int {

struct format {
    uint32_t type;
    int bits;   // 4 or 8
    int group;  // G: 32, 64 or 128
    constexpr uint32_t block_bytes() const { return 4u + static_cast<uint32_t>(group * bits / 8); }
};

inline constexpr format formats[] = {
    {STRATA_TYPE_Q4_G32, 4, 32},  {STRATA_TYPE_Q4_G64, 4, 64},  {STRATA_TYPE_Q4_G128, 4, 128},
    {STRATA_TYPE_Q8_G32, 8, 32},  {STRATA_TYPE_Q8_G64, 8, 64},  {STRATA_TYPE_Q8_G128, 8, 128},
};
inline constexpr int format_count = 6;

using strata::float16::fp16_to_fp32;

// The block's scale and zero.
inline float block_scale(const uint8_t *block) {
    uint16_t h;
    std::memcpy(&h, block, 2);
    return fp16_to_fp32(h);
}
inline int block_zero(const uint8_t *block) { return block[2]; }

// Element i (0 <= i < G) of a block's integers.
inline int block_q(const format &f, const uint8_t *block, int i) {
    const uint8_t *qs = block + 4;
    if (f.bits == 8) return qs[i];
    const int chunk = i / 32, j = i % 32;
    const uint8_t b = qs[chunk * 16 + (j % 16)];
    return j < 16 ? (b & 0x0f) : (b >> 4);
}

const format *find_format(uint32_t type);

// Reference conversions (n a multiple of the group).
void dequantize_row(const format &f, const void *src, float *dst, int64_t n);
// Round-to-nearest with an asymmetric range per group (min/max), as GPTQ's and AWQ's quantizers set scale and zero
// before their own rounding search: for tests and tools that need such rows from floats.
void quantize_row(const format &f, const float *src, void *dst, int64_t n);
// The element index where the first block whose scale is NaN or infinite starts; -1 when all are finite.
int64_t find_nonfinite(const format &f, const void *row, int64_t n);

// sum_i dequant(row)[i] * x[i], as a quant descriptor's dot_f32 for `type`: the portable kernel, and the
// AVX2+FMA+F16C one (call only when cpu_has_avx2_fma_f16c(); on other builds it is the portable one).
using dot_fn = float (*)(const void *row, const float *x, int64_t n);
// Kernels::dot<Bits, G> for `type` (nullptr for another type): one dispatch for every kernel set.
template <class Kernels> dot_fn dot_for(uint32_t type) {
    switch (type) {
    case STRATA_TYPE_Q4_G32: return Kernels::template dot<4, 32>;
    case STRATA_TYPE_Q4_G64: return Kernels::template dot<4, 64>;
    case STRATA_TYPE_Q4_G128: return Kernels::template dot<4, 128>;
    case STRATA_TYPE_Q8_G32: return Kernels::template dot<8, 32>;
    case STRATA_TYPE_Q8_G64: return Kernels::template dot<8, 64>;
    case STRATA_TYPE_Q8_G128: return Kernels::template dot<8, 128>;
    default: return nullptr;
    }
}
dot_fn dot_scalar_for(uint32_t type);
dot_fn dot_avx2_for(uint32_t type);
bool cpu_has_avx2_fma_f16c();

// The descriptor table the plugin exports: one per format, with the kernel set chosen once (AVX2+FMA+F16C when the
// CPU has them and STRATA_FORCE_SCALAR is unset or "0", else scalar).
const strata_quant_desc *descriptors();

} // namespace strata::group_int
