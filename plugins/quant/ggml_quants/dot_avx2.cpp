// AVX2+FMA+F16C dot kernels. This file alone is compiled with -mavx2 -mfma -mf16c (see CMakeLists.txt), so the rest
// of the plugin runs on any x86-64; the kernels are only called after cpu_has_avx2_fma() said yes.
//
// Do not call inline functions shared with other translation units (e.g. fp16_to_fp32 from float_formats.hpp) here:
// the linker could keep this file's AVX2 copy of such a function for every caller, including the scalar path.
// Everything below is either an intrinsic or has internal linkage.
//
// Shape of every kernel: several independent accumulators (so FMA latency never limits a memory-bound loop), one
// horizontal sum at the very end, no allocation.
#include "ggml_quants.hpp"

#include <cstring>

#if defined(__x86_64__) || defined(_M_X64)
#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "dot_avx2.cpp must be compiled with -mavx2 -mfma -mf16c"
#endif
#include <immintrin.h>

#include "avx2_block_helpers.hpp"

namespace strata::quants {
namespace {

STRATA_KERNEL_INLINE __m256 load_f16x8(const unsigned char *p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
}

// bf16 is the top half of a float32: widen to 32 bits and shift into place.
STRATA_KERNEL_INLINE __m256 load_bf16x8(const unsigned char *p) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}

// 8 int8 -> 8 floats.
STRATA_KERNEL_INLINE __m256 load_i8x8(const int8_t *p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(p))));
}

// Shared loop for the formats with one element per "block": 32 elements per iteration into 4 accumulators,
// then 8 at a time, then a scalar tail.
template <int BytesPerElement, class Load8, class Load1>
float dot_elementwise(const unsigned char *w, const float *x, int64_t n, Load8 load8, Load1 load1) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        acc0 = _mm256_fmadd_ps(load8(w + (i + 0) * BytesPerElement), _mm256_loadu_ps(x + i + 0), acc0);
        acc1 = _mm256_fmadd_ps(load8(w + (i + 8) * BytesPerElement), _mm256_loadu_ps(x + i + 8), acc1);
        acc2 = _mm256_fmadd_ps(load8(w + (i + 16) * BytesPerElement), _mm256_loadu_ps(x + i + 16), acc2);
        acc3 = _mm256_fmadd_ps(load8(w + (i + 24) * BytesPerElement), _mm256_loadu_ps(x + i + 24), acc3);
    }
    for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(load8(w + i * BytesPerElement), _mm256_loadu_ps(x + i), acc0);
    float sum = horizontal_sum(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
    for (; i < n; ++i) sum += load1(w + i * BytesPerElement) * x[i];
    return sum;
}

// One Q8_0 block: the 32-element partial dot (4 independent products) scaled by d into the accumulator.
STRATA_KERNEL_INLINE __m256 q8_0_block(const block_q8_0 &b, const float *x, __m256 acc) {
    __m256 p = _mm256_mul_ps(load_i8x8(b.qs + 0), _mm256_loadu_ps(x + 0));
    p = _mm256_fmadd_ps(load_i8x8(b.qs + 8), _mm256_loadu_ps(x + 8), p);
    p = _mm256_fmadd_ps(load_i8x8(b.qs + 16), _mm256_loadu_ps(x + 16), p);
    p = _mm256_fmadd_ps(load_i8x8(b.qs + 24), _mm256_loadu_ps(x + 24), p);
    return _mm256_fmadd_ps(_mm256_set1_ps(block_scale(&b.d)), p, acc);
}

// One Q4_0 block. Zero-extending bytes 0..7 and 8..15 to 32 bits puts element j's nibble in the low 4 bits and
// element j+16's in bits 4..7, so a mask and a shift give the four 8-element vectors in element order.
STRATA_KERNEL_INLINE __m256 q4_0_block(const block_q4_0 &b, const float *x, __m256 acc) {
    const __m256i low_mask = _mm256_set1_epi32(0x0f);
    const __m256i offset = _mm256_set1_epi32(8);
    const __m256i v0 = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(b.qs + 0)));
    const __m256i v1 = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(b.qs + 8)));
    const __m256 q0 = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_and_si256(v0, low_mask), offset));
    const __m256 q1 = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_and_si256(v1, low_mask), offset));
    const __m256 q2 = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(v0, 4), offset));
    const __m256 q3 = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(v1, 4), offset));
    __m256 p = _mm256_mul_ps(q0, _mm256_loadu_ps(x + 0));
    p = _mm256_fmadd_ps(q1, _mm256_loadu_ps(x + 8), p);
    p = _mm256_fmadd_ps(q2, _mm256_loadu_ps(x + 16), p);
    p = _mm256_fmadd_ps(q3, _mm256_loadu_ps(x + 24), p);
    return _mm256_fmadd_ps(_mm256_set1_ps(block_scale(&b.d)), p, acc);
}

// Shared loop for the 32-element block formats: 4 blocks per iteration, one accumulator each.
template <class Block, class BlockDot>
float dot_blocks(const Block *blocks, const float *x, int64_t nb, BlockDot block_dot) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 4 <= nb; b += 4) {
        acc0 = block_dot(blocks[b + 0], x + (b + 0) * 32, acc0);
        acc1 = block_dot(blocks[b + 1], x + (b + 1) * 32, acc1);
        acc2 = block_dot(blocks[b + 2], x + (b + 2) * 32, acc2);
        acc3 = block_dot(blocks[b + 3], x + (b + 3) * 32, acc3);
    }
    for (; b < nb; ++b) acc0 = block_dot(blocks[b], x + b * 32, acc0);
    return horizontal_sum(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
}

#undef STRATA_KERNEL_INLINE

} // namespace

float dot_f32_avx2(const void *row, const float *x, int64_t n) {
    return dot_elementwise<4>(
        static_cast<const unsigned char *>(row), x, n,
        [](const unsigned char *p) { return _mm256_loadu_ps(reinterpret_cast<const float *>(p)); },
        [](const unsigned char *p) {
            float v;
            std::memcpy(&v, p, sizeof v);
            return v;
        });
}

float dot_f16_avx2(const void *row, const float *x, int64_t n) {
    return dot_elementwise<2>(static_cast<const unsigned char *>(row), x, n,
                              [](const unsigned char *p) { return load_f16x8(p); },
                              [](const unsigned char *p) { return _cvtsh_ss(load_u16(p)); });
}

float dot_bf16_avx2(const void *row, const float *x, int64_t n) {
    return dot_elementwise<2>(static_cast<const unsigned char *>(row), x, n,
                               [](const unsigned char *p) { return load_bf16x8(p); }, [](const unsigned char *p) {
        const uint32_t bits = static_cast<uint32_t>(load_u16(p)) << 16;
        float v;
        std::memcpy(&v, &bits, sizeof v);
        return v;
    });
}

float dot_q8_0_avx2(const void *row, const float *x, int64_t n) {
    return dot_blocks(static_cast<const block_q8_0 *>(row), x, n / qk8_0,
                      [](const block_q8_0 &b, const float *xb, __m256 acc) { return q8_0_block(b, xb, acc); });
}

float dot_q4_0_avx2(const void *row, const float *x, int64_t n) {
    return dot_blocks(static_cast<const block_q4_0 *>(row), x, n / qk4_0,
                      [](const block_q4_0 &b, const float *xb, __m256 acc) { return q4_0_block(b, xb, acc); });
}

} // namespace strata::quants

#else // not x86-64: no AVX2 kernels; cpu_has_avx2_fma() is false, these exist only so the API links everywhere.

namespace strata::quants {
float dot_f32_avx2(const void *row, const float *x, int64_t n) { return dot_f32_scalar(row, x, n); }
float dot_f16_avx2(const void *row, const float *x, int64_t n) { return dot_f16_scalar(row, x, n); }
float dot_bf16_avx2(const void *row, const float *x, int64_t n) { return dot_bf16_scalar(row, x, n); }
float dot_q8_0_avx2(const void *row, const float *x, int64_t n) { return dot_q8_0_scalar(row, x, n); }
float dot_q4_0_avx2(const void *row, const float *x, int64_t n) { return dot_q4_0_scalar(row, x, n); }
} // namespace strata::quants

#endif
