// The float formats' elements for the GEMM tiles (gemm_float_avx2.cpp, gemm_float_avx512.cpp): eight elements
// widened to float (exactly), one element, and an accumulator's finish — the fixed reduction of its eight lanes
// (horizontal_sum), then the n % 8 tail elements with one FMA each: gemm_float_scalar.cpp's definition. Include only
// from files compiled with -mavx2 -mfma -mf16c (or more); internal linkage, so each file keeps a copy built for its
// own instruction set (see the note at the top of dot_avx2.cpp).
#pragma once

#include "avx2_block_helpers.hpp"

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace strata::quants {
namespace {

// The three element types: 8 elements widened to float (exactly), and one.
struct f32_elements {
    static constexpr int bytes = 4;
    static STRATA_KERNEL_INLINE __m256 load8(const unsigned char *p) {
        return _mm256_loadu_ps(reinterpret_cast<const float *>(p));
    }
    static STRATA_KERNEL_INLINE float load1(const unsigned char *p) {
        float v;
        std::memcpy(&v, p, sizeof v);
        return v;
    }
};
struct f16_elements {
    static constexpr int bytes = 2;
    static STRATA_KERNEL_INLINE __m256 load8(const unsigned char *p) {
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
    }
    static STRATA_KERNEL_INLINE float load1(const unsigned char *p) {
        uint16_t h;
        std::memcpy(&h, p, sizeof h);
        return _cvtsh_ss(h);
    }
};
struct bf16_elements {
    static constexpr int bytes = 2;
    static STRATA_KERNEL_INLINE __m256 load8(const unsigned char *p) {
        const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
    }
    static STRATA_KERNEL_INLINE float load1(const unsigned char *p) {
        uint16_t h;
        std::memcpy(&h, p, sizeof h);
        const uint32_t bits = static_cast<uint32_t>(h) << 16;
        float v;
        std::memcpy(&v, &bits, sizeof v);
        return v;
    }
};

// The fixed reduction of an accumulator, then the n % 8 tail elements with one FMA each.
template <class E>
STRATA_KERNEL_INLINE float finish(__m256 acc, const unsigned char *row, const float *x, int64_t i, int64_t n) {
    float sum = horizontal_sum(acc);
    for (; i < n; ++i)
        sum = _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(E::load1(row + i * E::bytes)), _mm_set_ss(x[i]), _mm_set_ss(sum)));
    return sum;
}

} // namespace
} // namespace strata::quants
