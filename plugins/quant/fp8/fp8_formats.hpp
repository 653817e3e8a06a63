// Strata's FP8 weight formats: the layout FP8 checkpoints (compressed-tensors' float-quantized and vLLM's / HF's
// fp8) are repacked into at load. A row of `cols` elements is cols / B blocks (B = 32 or 128); a block is an f32
// scale, then B e4m3 bytes (OCP "e4m3fn": sign, 4 exponent bits biased by 7, 3 mantissa bits, no infinities,
// S.1111.111 NaN): w = scale * e4m3(q). Per-tensor, per-channel and block scales all become each block's scale.
//
// Type ids are STRATA_TYPE_F8_E4M3_B{32,128} (plugin_abi.h). Every row function takes n a multiple of B and reads
// or writes whole blocks only; none allocates; all are thread-safe.
#pragma once

#include <strata/plugin_abi.h>

#include <cstdint>
#include <cstring>

namespace strata::fp8 {

struct format {
    uint32_t type;
    int block; // B: 32 or 128
    constexpr uint32_t block_bytes() const { return 4u + static_cast<uint32_t>(block); }
};

inline constexpr format formats[] = {{STRATA_TYPE_F8_E4M3_B32, 32}, {STRATA_TYPE_F8_E4M3_B128, 128}};
inline constexpr int format_count = 2;

const format *find_format(uint32_t type);

// The value of an e4m3 byte, exact (NaN for 0x7f and 0xff): strata/float8.hpp's, which the FP8 KV cache shares.
float e4m3_to_float(uint8_t q);
// v rounded to the nearest e4m3 (ties to even mantissa), saturating at +-448 as compressed-tensors' and vLLM's
// quantizers clamp; NaN -> 0x7f.
uint8_t float_to_e4m3(float v);
// The e4m3 byte as IEEE half bits: the same sign, exponent and mantissa moved into half's fields, so the half's value
// is e4m3(q) / 256 for every finite q (subnormals included); what the AVX2 kernel widens with F16C.
constexpr uint16_t e4m3_as_half_over_256(uint8_t q) {
    return static_cast<uint16_t>(((q & 0x80u) << 8) | ((q & 0x7fu) << 7));
}

inline float block_scale(const uint8_t *block) {
    float s;
    std::memcpy(&s, block, sizeof s);
    return s;
}

// Reference conversions (n a multiple of the block).
void dequantize_row(const format &f, const void *src, float *dst, int64_t n);
// Per block: scale = max |x| / 448 (1 when the block is all zeros), each element rounded to the nearest e4m3 of x /
// scale: what compressed-tensors' minmax observer and vLLM's per-tensor quantizer do, per block.
void quantize_row(const format &f, const float *src, void *dst, int64_t n);
// The element index where the first block starts whose scale is NaN or infinite or that holds a NaN byte; -1 when
// all are finite.
int64_t find_nonfinite(const format &f, const void *row, int64_t n);

// sum_i dequant(row)[i] * x[i], as a quant descriptor's dot_f32: the portable kernel, and the AVX2+FMA+F16C one
// (call only when the CPU has them; on other builds it is the portable one).
using dot_fn = float (*)(const void *row, const float *x, int64_t n);
template <class Kernels> dot_fn dot_for(uint32_t type) {
    switch (type) {
    case STRATA_TYPE_F8_E4M3_B32: return Kernels::template dot<32>;
    case STRATA_TYPE_F8_E4M3_B128: return Kernels::template dot<128>;
    default: return nullptr;
    }
}
dot_fn dot_scalar_for(uint32_t type);
dot_fn dot_avx2_for(uint32_t type);

// The descriptor table the plugin exports, one per format, with the kernel set chosen once (AVX2+FMA+F16C when the
// CPU has them and STRATA_FORCE_SCALAR is unset or "0", else scalar).
const strata_quant_desc *descriptors();

} // namespace strata::fp8
