// ggml-compatible block formats (F32, F16, BF16, Q8_0, Q4_0): reference quantize/dequantize, dot kernels and the
// strata_quant_desc table the ggml_quants plugin exports. The implementation is the static library
// strata_ggml_quants_impl so tests can call every kernel directly.
//
// Contract for every row function: n is a multiple of the format's block size (32 for Q8_0/Q4_0, 1 otherwise);
// only whole blocks are read or written. No function allocates; all are thread-safe.
#pragma once

#include "block_formats.hpp"
#include "float_formats.hpp"

#include <strata/plugin_abi.h>

#include <cstdint>

namespace strata::quants {

// ---- reference conversions (bit-exact with ggml's *_ref functions) ----
void quantize_row_f32(const float *src, void *dst, int64_t n);
void dequantize_row_f32(const void *src, float *dst, int64_t n);
void quantize_row_f16(const float *src, void *dst, int64_t n);
void dequantize_row_f16(const void *src, float *dst, int64_t n);
void quantize_row_bf16(const float *src, void *dst, int64_t n);
void dequantize_row_bf16(const void *src, float *dst, int64_t n);
void quantize_row_q8_0(const float *src, void *dst, int64_t n);
void dequantize_row_q8_0(const void *src, float *dst, int64_t n);
void quantize_row_q4_0(const float *src, void *dst, int64_t n);
void dequantize_row_q4_0(const void *src, float *dst, int64_t n);

// ---- dot kernels: sum_i dequant(row)[i] * x[i] ----
// Portable versions, correct on any CPU.
float dot_f32_scalar(const void *row, const float *x, int64_t n);
float dot_f16_scalar(const void *row, const float *x, int64_t n);
float dot_bf16_scalar(const void *row, const float *x, int64_t n);
float dot_q8_0_scalar(const void *row, const float *x, int64_t n);
float dot_q4_0_scalar(const void *row, const float *x, int64_t n);
// AVX2+FMA+F16C versions; call only when cpu_has_avx2_fma() is true (on non-x86 builds they forward to scalar).
float dot_f32_avx2(const void *row, const float *x, int64_t n);
float dot_f16_avx2(const void *row, const float *x, int64_t n);
float dot_bf16_avx2(const void *row, const float *x, int64_t n);
float dot_q8_0_avx2(const void *row, const float *x, int64_t n);
float dot_q4_0_avx2(const void *row, const float *x, int64_t n);

// ---- integer dot path (ABI 1.1 slots act_block_bytes / quantize_activations / dot_act) ----
// Activations are quantized once per matmul to Q8_0 values, as llama.cpp does (stored as block_q8_act), and each
// weight row is dotted with them in integers: one exact int32 sum per 32-element block, scaled by the product of the
// two block scales and accumulated in float.
inline constexpr uint32_t act_block_bytes_q8 = sizeof(block_q8_act);
// x -> block_q8_act; qs and d equal quantize_row_q8_0's bit for bit for finite input (the AVX2 version included).
void quantize_activations_q8_scalar(const float *x, void *xq, int64_t n);
void quantize_activations_q8_avx2(const float *x, void *xq, int64_t n);
// sum over blocks of d_row * d_act * (integer dot of the 32 quants); xq holds block_q8_act.
float dot_act_q8_0_scalar(const void *row, const void *xq, int64_t n);
float dot_act_q4_0_scalar(const void *row, const void *xq, int64_t n);
float dot_act_q8_0_avx2(const void *row, const void *xq, int64_t n);
float dot_act_q4_0_avx2(const void *row, const void *xq, int64_t n);
// ABI 1.2 dot_act_multi: out[i] = dot_act(row, xq + i * xq_stride_bytes, n) bit for bit (same kernel set), for
// i < n_x; each weight block is unpacked once for all n_x activation vectors.
void dot_act_multi_q8_0_scalar(const void *row, const void *xq, int64_t xq_stride_bytes, int32_t n_x, int64_t n,
                               float *out);
void dot_act_multi_q4_0_scalar(const void *row, const void *xq, int64_t xq_stride_bytes, int32_t n_x, int64_t n,
                               float *out);
void dot_act_multi_q8_0_avx2(const void *row, const void *xq, int64_t xq_stride_bytes, int32_t n_x, int64_t n,
                             float *out);
void dot_act_multi_q4_0_avx2(const void *row, const void *xq, int64_t xq_stride_bytes, int32_t n_x, int64_t n,
                             float *out);
// The same with AVX-VNNI's vpdpbusd (same integer lanes, so the same bits); call only when cpu_has_avx_vnni().
void dot_act_multi_q8_0_avxvnni(const void *row, const void *xq, int64_t xq_stride_bytes, int32_t n_x, int64_t n,
                                float *out);
void dot_act_multi_q4_0_avxvnni(const void *row, const void *xq, int64_t xq_stride_bytes, int32_t n_x, int64_t n,
                                float *out);
// What the AVX2 descriptors carry: the AVX-VNNI kernel when cpu_has_avx_vnni() (checked once, at load), else AVX2.
void dot_act_multi_q8_0_avx2_or_vnni(const void *row, const void *xq, int64_t xq_stride_bytes, int32_t n_x,
                                     int64_t n, float *out);
void dot_act_multi_q4_0_avx2_or_vnni(const void *row, const void *xq, int64_t xq_stride_bytes, int32_t n_x,
                                     int64_t n, float *out);

// ---- kernel selection ----
enum class kernel_set { scalar, avx2_fma };

// True when this build has the AVX2 kernels and the CPU supports AVX2, FMA and F16C.
bool cpu_has_avx2_fma();
// True when additionally this build has the AVX-VNNI kernels and the CPU supports AVX-VNNI (Alder Lake, Zen 4 and
// later). Only dot_act_multi uses it; it is never forced: its results equal the AVX2 kernel's bit for bit.
bool cpu_has_avx_vnni();
// What descriptors() would pick right now: avx2_fma when the CPU has it, unless the environment variable
// STRATA_FORCE_SCALAR is set to a value other than "" or "0". Reads the environment on every call.
kernel_set select_kernel_set();
const char *kernel_set_name(kernel_set set); // "avx2+fma" or "scalar"

inline constexpr int descriptor_count = 5;

// The five descriptors ("f32", "f16", "bf16", "q8_0", "q4_0", in that order) wired to the given kernels.
const strata_quant_desc *descriptors(kernel_set set);
// The same, with the kernel set chosen once (select_kernel_set() at the first call) for the life of the process.
const strata_quant_desc *descriptors();
int n_descriptors();

} // namespace strata::quants
