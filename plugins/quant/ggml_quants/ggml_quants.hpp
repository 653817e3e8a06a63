// ggml-compatible block formats (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K..Q6_K, IQ4_XS; Q8_K as
// the K-quants' activations): reference quantize/dequantize, dot kernels and the strata_quant_desc table the
// ggml_quants plugin exports. The implementation is the static library
// strata_ggml_quants_impl so tests can call every kernel directly.
//
// Contract for every row function: n is a multiple of the format's block size (256 for the K-quants and IQ4_XS, 32
// for the other block formats, 1 for the float formats);
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
void quantize_row_q4_1(const float *src, void *dst, int64_t n);
void dequantize_row_q4_1(const void *src, float *dst, int64_t n);
void quantize_row_q5_0(const float *src, void *dst, int64_t n);
void dequantize_row_q5_0(const void *src, float *dst, int64_t n);
void quantize_row_q5_1(const float *src, void *dst, int64_t n);
void dequantize_row_q5_1(const void *src, float *dst, int64_t n);
void quantize_row_iq4_nl(const float *src, void *dst, int64_t n);
void dequantize_row_iq4_nl(const void *src, float *dst, int64_t n);
void quantize_row_q2_k(const float *src, void *dst, int64_t n);
void dequantize_row_q2_k(const void *src, float *dst, int64_t n);
void quantize_row_q3_k(const float *src, void *dst, int64_t n);
void dequantize_row_q3_k(const void *src, float *dst, int64_t n);
void quantize_row_q4_k(const float *src, void *dst, int64_t n);
void dequantize_row_q4_k(const void *src, float *dst, int64_t n);
void quantize_row_q5_k(const float *src, void *dst, int64_t n);
void dequantize_row_q5_k(const void *src, float *dst, int64_t n);
void quantize_row_q6_k(const float *src, void *dst, int64_t n);
void dequantize_row_q6_k(const void *src, float *dst, int64_t n);
void quantize_row_iq4_xs(const float *src, void *dst, int64_t n);
void dequantize_row_iq4_xs(const void *src, float *dst, int64_t n);
// Q8_K: the activation format of the K-quant and IQ4_XS integer dots (bsums included; an all-zero block gets zero
// bsums, which ggml leaves unwritten).
void quantize_row_q8_k(const float *src, void *dst, int64_t n);
void dequantize_row_q8_k(const void *src, float *dst, int64_t n);
// The K-quant integer path's activation quantizer: quantize_row_q8_k, except that a block holding a NaN gets a NaN
// scale (ggml zeroes the NaN), so the NaN reaches the dot product and the logits instead of vanishing. The Q8_0
// activation quantizers do the same.
void quantize_activations_q8k(const float *x, void *xq, int64_t n);
// Q3_K's sixteen biased 6-bit scales from their 12 packed bytes (values 0..63; the scale is value - 32).
void unpack_q3_k_scales(const uint8_t *packed, int8_t *scales);

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
// Blocks of block_q8_act -> block_q8_act_sum in place (s = d * float(sum_x8 / 8)); both kernel sets' Q4_1/Q5_1
// activation quantizers end with it, so they write the same bytes.
void scale_activation_sums(void *xq, int64_t n);
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

// ---- GEMM path (ABI 1.22 gemm_act) for Q8_0, Q4_0, Q5_0 and Q4_K ----
// out[t * out_stride + r] = gemm_one(row r, activation vector t): per block the exact int32 quant sum, then
// acc = fma(d_w * d_a, float(sum), acc) from +0 (Q4_K: per super-block its exact scaled sum and min sum, then two
// such FMAs; gemm_act_scalar.cpp). The AVX2 and AVX-VNNI kernels compute eight rows at a time (gemm_act_tile.hpp;
// Q4_K in AVX2 and, sixteen rows at a time, AVX-512: gemm_act_q4_k_tile.hpp, gemm_act_avx512.cpp) with the same bits, whatever the call's shape. (Q5_0's and Q4_K's dot_act keep their own lanes, k_block_ints.hpp; the device takes
// gemm_act wherever a descriptor has it, so the two never meet. The other K-quants' gemm_act on x86 is k_gemm_act,
// with dot_act's bits.)
inline constexpr uint32_t gemm_row_tile = 8;
using gemm_act_fn = void (*)(const void *w, int64_t row_bytes, int64_t n_rows, const void *xq,
                             int64_t xq_stride_bytes, int32_t n_x, int64_t n, float *out, int64_t out_stride);
float gemm_one_q8_0(const void *row, const void *xq, int64_t n);
float gemm_one_q4_0(const void *row, const void *xq, int64_t n);
float gemm_one_q5_0(const void *row, const void *xq, int64_t n);
float gemm_one_q4_k(const void *row, const void *xq, int64_t n); // Q8_K activations
// The 16-row AVX-512 tiles (gemm_act_avx512.cpp; rows past the last 16 through the AVX2/AVX-VNNI tiles): call only
// when cpu_has_avx512_vnni(). The table's Q8_0 / Q4_0 entries pick among the three at run time (*_x86), its Q5_0 and
// Q4_K entries are gemm_act_q5_0_avx512 / gemm_act_q4_k_avx512 on such a CPU; their descriptors then say
// avx512_gemm_row_tile rows (the CPU device hands its threads whole tiles).
inline constexpr uint32_t avx512_gemm_row_tile = 16;
void gemm_act_q8_0_avx512(const void *w, int64_t row_bytes, int64_t n_rows, const void *xq, int64_t xq_stride_bytes,
                          int32_t n_x, int64_t n, float *out, int64_t out_stride);
void gemm_act_q4_0_avx512(const void *w, int64_t row_bytes, int64_t n_rows, const void *xq, int64_t xq_stride_bytes,
                          int32_t n_x, int64_t n, float *out, int64_t out_stride);
void gemm_act_q5_0_avx512(const void *w, int64_t row_bytes, int64_t n_rows, const void *xq, int64_t xq_stride_bytes,
                          int32_t n_x, int64_t n, float *out, int64_t out_stride);
void gemm_act_q4_k_avx512(const void *w, int64_t row_bytes, int64_t n_rows, const void *xq, int64_t xq_stride_bytes,
                          int32_t n_x, int64_t n, float *out, int64_t out_stride);
void gemm_act_q8_0_x86(const void *w, int64_t row_bytes, int64_t n_rows, const void *xq, int64_t xq_stride_bytes,
                       int32_t n_x, int64_t n, float *out, int64_t out_stride);
void gemm_act_q4_0_x86(const void *w, int64_t row_bytes, int64_t n_rows, const void *xq, int64_t xq_stride_bytes,
                       int32_t n_x, int64_t n, float *out, int64_t out_stride);
void gemm_act_q8_0_scalar(const void *w, int64_t row_bytes, int64_t n_rows, const void *xq, int64_t xq_stride_bytes,
                          int32_t n_x, int64_t n, float *out, int64_t out_stride);
void gemm_act_q4_0_scalar(const void *w, int64_t row_bytes, int64_t n_rows, const void *xq, int64_t xq_stride_bytes,
                          int32_t n_x, int64_t n, float *out, int64_t out_stride);
void gemm_act_q5_0_scalar(const void *w, int64_t row_bytes, int64_t n_rows, const void *xq, int64_t xq_stride_bytes,
                          int32_t n_x, int64_t n, float *out, int64_t out_stride);
void gemm_act_q4_k_scalar(const void *w, int64_t row_bytes, int64_t n_rows, const void *xq, int64_t xq_stride_bytes,
                          int32_t n_x, int64_t n, float *out, int64_t out_stride);
void gemm_act_q8_0_avx2(const void *w, int64_t row_bytes, int64_t n_rows, const void *xq, int64_t xq_stride_bytes,
                        int32_t n_x, int64_t n, float *out, int64_t out_stride);
void gemm_act_q4_0_avx2(const void *w, int64_t row_bytes, int64_t n_rows, const void *xq, int64_t xq_stride_bytes,
                        int32_t n_x, int64_t n, float *out, int64_t out_stride);
void gemm_act_q5_0_avx2(const void *w, int64_t row_bytes, int64_t n_rows, const void *xq, int64_t xq_stride_bytes,
                        int32_t n_x, int64_t n, float *out, int64_t out_stride);
void gemm_act_q4_k_avx2(const void *w, int64_t row_bytes, int64_t n_rows, const void *xq, int64_t xq_stride_bytes,
                        int32_t n_x, int64_t n, float *out, int64_t out_stride);
// Call only when cpu_has_avx_vnni().
void gemm_act_q8_0_avxvnni(const void *w, int64_t row_bytes, int64_t n_rows, const void *xq, int64_t xq_stride_bytes,
                           int32_t n_x, int64_t n, float *out, int64_t out_stride);
void gemm_act_q4_0_avxvnni(const void *w, int64_t row_bytes, int64_t n_rows, const void *xq, int64_t xq_stride_bytes,
                           int32_t n_x, int64_t n, float *out, int64_t out_stride);
void gemm_act_q5_0_avxvnni(const void *w, int64_t row_bytes, int64_t n_rows, const void *xq, int64_t xq_stride_bytes,
                           int32_t n_x, int64_t n, float *out, int64_t out_stride);
// What the AVX2 descriptors carry: the AVX-VNNI kernel when cpu_has_avx_vnni() (checked once, at load), else AVX2.
void gemm_act_q8_0_avx2_or_vnni(const void *w, int64_t row_bytes, int64_t n_rows, const void *xq,
                                int64_t xq_stride_bytes, int32_t n_x, int64_t n, float *out, int64_t out_stride);
void gemm_act_q4_0_avx2_or_vnni(const void *w, int64_t row_bytes, int64_t n_rows, const void *xq,
                                int64_t xq_stride_bytes, int32_t n_x, int64_t n, float *out, int64_t out_stride);
void gemm_act_q5_0_avx2_or_vnni(const void *w, int64_t row_bytes, int64_t n_rows, const void *xq,
                                int64_t xq_stride_bytes, int32_t n_x, int64_t n, float *out, int64_t out_stride);

// ---- GEMM path for the float formats (ABI 1.22 gemm_f32): F32, F16, BF16 ----
// out[t * out_stride + r] = gemm_one(row r, x_t): eight lane sums (lane j: elements 8c + j, one FMA each), the fixed
// reduction, then the n % 8 tail with one FMA each (gemm_float_scalar.cpp); the AVX2 tiles (4 rows x 3 vectors,
// gemm_float_avx2.cpp) and the AVX-512 ones (4 rows x 8 vectors, two rows per register, gemm_float_avx512.cpp) give
// the same bits.
inline constexpr uint32_t float_gemm_row_tile = 4;
using gemm_f32_fn = void (*)(const void *w, int64_t row_bytes, int64_t n_rows, const float *x, int64_t x_stride,
                             int32_t n_x, int64_t n, float *out, int64_t out_stride);
float gemm_one_f32(const void *row, const float *x, int64_t n);
float gemm_one_f16(const void *row, const float *x, int64_t n);
float gemm_one_bf16(const void *row, const float *x, int64_t n);
void gemm_f32_f32_scalar(const void *w, int64_t row_bytes, int64_t n_rows, const float *x, int64_t x_stride,
                         int32_t n_x, int64_t n, float *out, int64_t out_stride);
void gemm_f32_f16_scalar(const void *w, int64_t row_bytes, int64_t n_rows, const float *x, int64_t x_stride,
                         int32_t n_x, int64_t n, float *out, int64_t out_stride);
void gemm_f32_bf16_scalar(const void *w, int64_t row_bytes, int64_t n_rows, const float *x, int64_t x_stride,
                          int32_t n_x, int64_t n, float *out, int64_t out_stride);
void gemm_f32_f32_avx2(const void *w, int64_t row_bytes, int64_t n_rows, const float *x, int64_t x_stride,
                       int32_t n_x, int64_t n, float *out, int64_t out_stride);
void gemm_f32_f16_avx2(const void *w, int64_t row_bytes, int64_t n_rows, const float *x, int64_t x_stride,
                       int32_t n_x, int64_t n, float *out, int64_t out_stride);
void gemm_f32_bf16_avx2(const void *w, int64_t row_bytes, int64_t n_rows, const float *x, int64_t x_stride,
                        int32_t n_x, int64_t n, float *out, int64_t out_stride);
// The AVX-512 tiles (4 rows x 8 vectors): call only where cpu_has_avx512_vnni().
void gemm_f32_f32_avx512(const void *w, int64_t row_bytes, int64_t n_rows, const float *x, int64_t x_stride,
                         int32_t n_x, int64_t n, float *out, int64_t out_stride);
void gemm_f32_f16_avx512(const void *w, int64_t row_bytes, int64_t n_rows, const float *x, int64_t x_stride,
                         int32_t n_x, int64_t n, float *out, int64_t out_stride);
void gemm_f32_bf16_avx512(const void *w, int64_t row_bytes, int64_t n_rows, const float *x, int64_t x_stride,
                          int32_t n_x, int64_t n, float *out, int64_t out_stride);
// The F16 / BF16 tiles of tall_float_gemm_row_tile rows x 4 vectors, the same bits: what the x86 entries below pick
// where avx512_tall_float_tiles() (AVX-512 F/BW/VL/VNNI on an AMD CPU; gemm_float_avx512.cpp says why), and then the
// F16 / BF16 descriptors' gemm_row_tile.
inline constexpr uint32_t tall_float_gemm_row_tile = 12;
bool avx512_tall_float_tiles();
void gemm_f32_f16_avx512_tall(const void *w, int64_t row_bytes, int64_t n_rows, const float *x, int64_t x_stride,
                              int32_t n_x, int64_t n, float *out, int64_t out_stride);
void gemm_f32_bf16_avx512_tall(const void *w, int64_t row_bytes, int64_t n_rows, const float *x, int64_t x_stride,
                               int32_t n_x, int64_t n, float *out, int64_t out_stride);
// The AVX2 descriptors' gemm_f32: the AVX-512 tiles where the CPU has them (checked once at load), else the AVX2 ones.
void gemm_f32_f32_x86(const void *w, int64_t row_bytes, int64_t n_rows, const float *x, int64_t x_stride, int32_t n_x,
                      int64_t n, float *out, int64_t out_stride);
void gemm_f32_f16_x86(const void *w, int64_t row_bytes, int64_t n_rows, const float *x, int64_t x_stride, int32_t n_x,
                      int64_t n, float *out, int64_t out_stride);
void gemm_f32_bf16_x86(const void *w, int64_t row_bytes, int64_t n_rows, const float *x, int64_t x_stride, int32_t n_x,
                       int64_t n, float *out, int64_t out_stride);

// ---- the formats added after Q8_0/Q4_0: their kernels by GGUF type id ----
// Every format's float dot dequantizes one block at a time (the reference dequantizer) and dots it with x; the
// integer path quantizes activations to block_q8_act (32-element formats; block_q8_act_sum for Q4_1/Q5_1, whose
// min meets the block's scaled sum) or block_q8_k (256-element formats, bit for bit ggml's quantize_row_q8_K_ref) and
// sums exact int32 products per group; every format's sums stay in eight lanes that each block adds to eight float
// lanes with FMAs, reduced once per row (k_block_ints.hpp). dot_act is dot_act_multi with one vector, so the two
// agree bit for bit.
using dot_fn = float (*)(const void *row, const float *x, int64_t n);
using quantize_fn = void (*)(const float *x, void *xq, int64_t n);
using dot_act_fn = float (*)(const void *row, const void *xq, int64_t n);
using dot_act_multi_fn = void (*)(const void *row, const void *xq, int64_t xq_stride_bytes, int32_t n_x, int64_t n,
                                  float *out);
struct format_kernels {
    dot_fn dot = nullptr;
    uint32_t act_block_bytes = 0;
    quantize_fn quantize_activations = nullptr;
    dot_act_fn dot_act = nullptr;
    dot_act_multi_fn dot_act_multi = nullptr;
    gemm_act_fn gemm_act = nullptr; // with gemm_row_tile rows per tile
};
// Kernels of ggml type `type` (one of the added formats; zero-filled for any other type).
format_kernels added_format_kernels_scalar(uint32_t type);
format_kernels added_format_kernels_avx2(uint32_t type); // call only when cpu_has_avx2_fma()
// The AVX2 kernels with the integer dots in AVX-512 (the 256-element formats in 512-bit registers, the 32-element
// ones with vpdpbusd on 256 bits; equal bit for bit); call only when cpu_has_avx512_vnni(). The AVX2 table carries
// these on such CPUs.
format_kernels added_format_kernels_avx512(uint32_t type);

// ---- damage check (ABI 1.10 find_nonfinite) ----
// Element index of the first block of a row of ggml type `type` whose scale/min (float formats: value) is NaN or
// infinite; -1 when none is (and for types this plugin does not know).
int64_t find_nonfinite(uint32_t type, const void *row, int64_t n);

// ---- kernel selection ----
enum class kernel_set { scalar, avx2_fma };

// True when this build has the AVX2 kernels and the CPU supports AVX2, FMA and F16C.
bool cpu_has_avx2_fma();
// True when additionally this build has the AVX-VNNI kernels and the CPU supports AVX-VNNI (Alder Lake, Zen 4 and
// later). Only dot_act_multi and gemm_act use it; it is never forced: its results equal the AVX2 kernel's bit for bit.
bool cpu_has_avx_vnni();
// True when additionally the CPU (and OS: ZMM and mask state) supports AVX-512 F, BW, VL and VNNI (Ice Lake,
// Sapphire Rapids, Zen 4 and later), unless STRATA_NO_AVX512 is set (cpu_features.hpp). The added formats' dot_act,
// dot_act_multi and (K-quants) gemm_act use it; never forced.
bool cpu_has_avx512_vnni();
// What descriptors() would pick right now: avx2_fma when the CPU has it, unless the environment variable
// STRATA_FORCE_SCALAR is set to a value other than "" or "0". Reads the environment on every call.
kernel_set select_kernel_set();
const char *kernel_set_name(kernel_set set); // "avx2+fma" or "scalar"

inline constexpr int descriptor_count = 15;

// The descriptors ("f32", "f16", "bf16", "q8_0", "q4_0", then "q4_1", "q5_0", "q5_1", "iq4_nl", "q2_k", "q3_k",
// "q4_k", "q5_k", "q6_k", "iq4_xs") wired to the given kernels.
const strata_quant_desc *descriptors(kernel_set set);
// The same, with the kernel set chosen once (select_kernel_set() at the first call) for the life of the process.
const strata_quant_desc *descriptors();
int n_descriptors();

} // namespace strata::quants
