// The two helpers every AVX2 kernel file of this plugin needs: a horizontal sum and a block's fp16 scale. Include
// only from files compiled with -mavx2 -mfma -mf16c (or more). Internal linkage, so each file keeps a copy built
// for its own instruction set (see the note at the top of dot_avx2.cpp).
#pragma once

#include "block_formats.hpp"

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace strata::quants {
namespace {

// The per-block helpers are called several times per loop; GCC would otherwise keep them out of line.
#ifndef STRATA_KERNEL_INLINE
#define STRATA_KERNEL_INLINE inline __attribute__((always_inline))
#endif

STRATA_KERNEL_INLINE float horizontal_sum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

STRATA_KERNEL_INLINE float block_scale(const half_bits *d) { return _cvtsh_ss(*d); }

} // namespace
} // namespace strata::quants
